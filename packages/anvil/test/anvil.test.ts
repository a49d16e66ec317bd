import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Wallet, parseEther } from 'ethers';
import {
  ChainClock,
  DevWallet,
  createDevProvider,
  sendWithBlobs,
  isProcessAlive as isAlive,
  startAnvil,
  type AnvilAccount,
  type AnvilInstance,
} from '../src/index.js';

async function waitUntilDead(pid: number, timeoutMs = 5_000): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (!isAlive(pid)) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return !isAlive(pid);
}

describe('startAnvil', () => {
  let anvil: AnvilInstance;

  beforeAll(async () => {
    anvil = await startAnvil({ chainId: 4242, accounts: 3, warmBlobs: true });
  });

  afterAll(async () => {
    await anvil.stop();
  });

  it('serves the requested chain id on a free port with funded accounts it knows the keys of', async () => {
    expect(anvil.rpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
    try {
      expect((await provider.getNetwork()).chainId).toBe(4242n);
      expect(anvil.accounts).toHaveLength(3);
      for (const account of anvil.accounts) {
        expect(new Wallet(account.privateKey).address).toBe(account.address);
        expect(await provider.getBalance(account.address)).toBeGreaterThan(parseEther('1000'));
      }
    } finally {
      provider.destroy();
    }
  });

  it('accepts blob transactions (one or two blobs) and ordinary ones from the same helper', async () => {
    const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
    try {
      const wallet = new Wallet(anvil.accounts[0]!.privateKey, provider);
      const oneBlob = await (await sendWithBlobs(wallet, { to: wallet.address }, 1)).wait();
      const twoBlobs = await (await sendWithBlobs(wallet, { to: wallet.address }, 2)).wait();
      const noBlob = await (await sendWithBlobs(wallet, { to: wallet.address }, 0)).wait();
      expect(oneBlob?.type).toBe(3);
      expect(oneBlob?.blobGasUsed).toBe(131_072n);
      expect(twoBlobs?.blobGasUsed).toBe(2n * 131_072n);
      expect(noBlob?.type).toBe(2);
    } finally {
      provider.destroy();
    }
  });

  it('runs two instances side by side on different ports', async () => {
    const second = await startAnvil({ accounts: 1 });
    try {
      expect(second.rpcUrl).not.toBe(anvil.rpcUrl);
      expect(second.chainId).toBe(31337);
    } finally {
      await second.stop();
    }
  });

  it('stops the process and waits for it; stopping twice is harmless', async () => {
    const instance = await startAnvil({ accounts: 1 });
    expect(isAlive(instance.pid)).toBe(true);
    await instance.stop();
    expect(isAlive(instance.pid)).toBe(false);
    await instance.stop();
  });

  it('starts on a given port and refuses one that is taken, leaving no process behind', async () => {
    const port = Number(new URL(anvil.rpcUrl).port);
    await expect(startAnvil({ port, accounts: 1 })).rejects.toThrow(/anvil exited before listening/);
  });

  it('kills anvil when the process that started it ends without stopping it', async () => {
    const launcher = fileURLToPath(new URL('./fixtures/forgetful-launcher.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', launcher], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    const pid = Number(/anvil pid (\d+)/.exec(output)?.[1]);
    expect(pid).toBeGreaterThan(0);
    expect(await waitUntilDead(pid)).toBe(true);
  });
});

describe('ChainClock', () => {
  let anvil: AnvilInstance;

  beforeAll(async () => {
    anvil = await startAnvil({ accounts: 2 });
  });

  afterAll(async () => {
    await anvil.stop();
  });

  it('moves block time forward and reverts state to a snapshot', async () => {
    const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
    try {
      const clock = new ChainClock(provider);
      const [from, to] = anvil.accounts as [AnvilAccount, AnvilAccount];
      const before = await provider.getBalance(to.address);
      const snapshot = await clock.snapshot();
      const start = await clock.now();
      expect(await clock.advance(3_600)).toBeGreaterThanOrEqual(start + 3_600);
      await (
        await new Wallet(from.privateKey, provider).sendTransaction({ to: to.address, value: 1n })
      ).wait();
      expect(await provider.getBalance(to.address)).toBe(before + 1n);
      await clock.revert(snapshot);
      expect(await provider.getBalance(to.address)).toBe(before);
      expect(await clock.now()).toBeLessThan(start + 3_600);
      await clock.setNextBlockTimestamp(start + 10_000);
      await clock.mine();
      expect(await clock.now()).toBe(start + 10_000);
    } finally {
      provider.destroy();
    }
  });
});

describe('deterministic block time and gas headroom', () => {
  let anvil: AnvilInstance;

  beforeAll(async () => {
    anvil = await startAnvil({ accounts: 2, blockTimestampInterval: 1 });
  });

  afterAll(async () => {
    await anvil.stop();
  });

  it('with blockTimestampInterval each block is one second after the last, and pending calls see it', async () => {
    const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
    try {
      const clock = new ChainClock(provider);
      const start = await clock.now();
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      await clock.mine();
      await clock.mine();
      expect(await clock.now()).toBe(start + 2);
      const pending = await provider.getBlock('pending');
      expect(pending?.timestamp).toBe(start + 3);
    } finally {
      provider.destroy();
    }
  });

  it('DevWallet asks for 20% more gas than the node estimates', async () => {
    const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
    try {
      const [from, to] = anvil.accounts as [AnvilAccount, AnvilAccount];
      const wallet = new DevWallet(from.privateKey, provider);
      const request = { from: from.address, to: to.address, value: 1n };
      expect(await wallet.estimateGas(request)).toBe(((await provider.estimateGas(request)) * 6n) / 5n);
      const sent = await wallet.sendTransaction({ to: to.address, value: 1n });
      expect(sent.gasLimit).toBe(25_200n);
    } finally {
      provider.destroy();
    }
  });
});
