import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  DEFAULT_PROTOCOL_PARAMETERS,
  DEFAULT_STAKING_PARAMETERS,
  connectJobRegistry,
  connectWorkerRegistry,
  fromParametersStruct,
  jobRegistryBytecode,
  modelIdOf,
  workerRegistryBytecode,
} from '@svc/contracts';
import { createDevProvider, isProcessAlive as isAlive, sendWithBlobs, startAnvil } from '@svc/anvil';
import { freePort } from '@svc/testkit';
import { HDNodeWallet, Wallet, parseEther, type JsonRpcProvider } from 'ethers';
import {
  DEMO_MODELS,
  DEMO_WALLET_DEPOSIT_WEI,
  InvalidDevnetDescription,
  accountWithRole,
  operatorAccounts,
  describeExternalChain,
  parseDevnetDescription,
  readDevnetDescription,
  removeDevnetDescription,
  startDevnet,
  type Devnet,
  type DevnetDescription,
} from '../src/index.js';

/** anvil's dev account `index`, derived from its well-known mnemonic as anvil derives it. */
function anvilAddress(index: number): string {
  return HDNodeWallet.fromPhrase(
    'test test test test test test test test test test test junk',
    undefined,
    `m/44'/60'/0'/0/${index}`,
  ).address;
}

/** The set-up a fresh devnet makes: operators accepted, wallet 1 paid up, the other wallets bare. */
async function expectPreparedAccounts(description: DevnetDescription, provider: JsonRpcProvider) {
  const jobRegistry = connectJobRegistry(description.contracts.jobRegistry, provider);
  const signer = accountWithRole(description.accounts, 'service-signer').address;
  const operators = operatorAccounts(description.accounts);
  expect(operators).toHaveLength(3);
  for (const operator of operators) {
    expect(await jobRegistry.principalOf(operator.address)).toBe(signer);
    expect(await jobRegistry.isOperatorOffered(signer, operator.address)).toBe(false);
  }
  const [first, ...others] = description.accounts.filter((account) => account.role === 'wallet');
  expect(await jobRegistry.prepaidBalanceOf(first!.address)).toBe(DEMO_WALLET_DEPOSIT_WEI);
  expect(await jobRegistry.isDelegateAuthorized(first!.address, signer)).toBe(true);
  expect(await jobRegistry.delegateAllowance(first!.address, signer)).toBe(parseEther('1'));
  for (const wallet of others) {
    expect(await jobRegistry.prepaidBalanceOf(wallet.address)).toBe(0n);
    expect(await jobRegistry.isDelegateAuthorized(wallet.address, signer)).toBe(false);
    expect(await jobRegistry.delegateAllowance(wallet.address, signer)).toBe(0n);
    expect(await provider.getBalance(wallet.address)).toBeGreaterThan(parseEther('1000'));
  }
}

describe('startDevnet', () => {
  let directory: string;
  let descriptionPath: string;
  let devnet: Devnet;
  let provider: JsonRpcProvider;

  beforeAll(async () => {
    directory = mkdtempSync(join(tmpdir(), 'svc-devnet-test-'));
    descriptionPath = join(directory, 'nested', 'devnet.json');
    devnet = await startDevnet({ descriptionPath });
    provider = createDevProvider(devnet.description.rpcUrl, devnet.description.chainId);
  }, 60_000);

  afterAll(async () => {
    provider?.destroy();
    await devnet?.stop();
    rmSync(directory, { recursive: true, force: true });
  });

  it('writes a description file that reads back as what startDevnet returned, readable by its owner only', () => {
    expect(devnet.descriptionPath).toBe(descriptionPath);
    expect(readDevnetDescription(descriptionPath)).toEqual(devnet.description);
    expect(statSync(descriptionPath).mode & 0o777).toBe(0o600);
    const raw = JSON.parse(readFileSync(descriptionPath, 'utf8')) as Record<string, unknown>;
    expect(raw).toMatchObject({ version: 1, chainId: 31337, blockTimeSeconds: null });
    expect(devnet.description.rpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(isAlive(devnet.description.anvilPid)).toBe(true);
  });

  it('serves the described chain id at the described RPC URL', async () => {
    expect(Number((await provider.getNetwork()).chainId)).toBe(devnet.description.chainId);
  });

  it('deploys both contracts, linked, owned by the owner account, with the described parameters', async () => {
    const { contracts, parameters } = devnet.description;
    const jobRegistry = connectJobRegistry(contracts.jobRegistry, provider);
    const workerRegistry = connectWorkerRegistry(contracts.workerRegistry, provider);
    const owner = accountWithRole(devnet.description.accounts, 'owner').address;

    expect(await jobRegistry.owner()).toBe(owner);
    expect(await workerRegistry.owner()).toBe(owner);
    expect(await jobRegistry.workerRegistry()).toBe(contracts.workerRegistry);
    expect(await workerRegistry.jobRegistry()).toBe(contracts.jobRegistry);

    const onChain = fromParametersStruct(await jobRegistry.parameters());
    expect(onChain).toEqual(DEFAULT_PROTOCOL_PARAMETERS);
    expect({ ...onChain, mismatchSlashWei: onChain.mismatchSlashWei.toString() }).toEqual(
      parameters.protocol,
    );
    expect(await workerRegistry.minStake()).toBe(BigInt(parameters.staking.minStakeWei));
    expect(await workerRegistry.minStake()).toBe(DEFAULT_STAKING_PARAMETERS.minStakeWei);
    expect(Number(await workerRegistry.unbondingDelay())).toBe(parameters.staking.unbondingDelaySeconds);

    const deployed = await provider.getTransactionReceipt(
      (await provider.getBlock(contracts.deploymentBlock, true))!.prefetchedTransactions[0]!.hash,
    );
    expect(deployed?.contractAddress).toBe(contracts.workerRegistry);
  });

  it('configures the demo models, Ollama-style names with colons, at the described fees', async () => {
    const jobRegistry = connectJobRegistry(devnet.description.contracts.jobRegistry, provider);
    const { models } = devnet.description;
    expect(models.map((model) => model.name)).toEqual(['llama3.2:1b', 'qwen2.5:0.5b']);
    expect(models.map((model) => model.feeWei)).toEqual(DEMO_MODELS.map((model) => model.feeWei.toString()));
    for (const model of models) {
      expect(model.modelId).toBe(modelIdOf(model.name));
      expect(await jobRegistry.jobFee(model.modelId)).toBe(BigInt(model.feeWei));
      expect(BigInt(model.feeWei)).toBeGreaterThan(0n);
    }
  });

  it('hands out funded accounts with roles and their keys, and registers no worker for them', async () => {
    const { accounts, contracts } = devnet.description;
    expect(accounts.map((account) => account.role)).toEqual([
      'owner',
      'service-signer',
      'worker',
      'worker',
      'wallet',
      'wallet',
      'wallet',
      'operator',
      'operator',
      'operator',
      'facilitator',
      'facilitator-operator',
    ]);
    // anvil's order, each newer group after the older ones: the accounts older than it kept their index.
    expect(accounts.map((account) => account.address)).toEqual(
      accounts.map((_, index) => anvilAddress(index)),
    );
    expect(new Set(accounts.map((account) => account.address)).size).toBe(accounts.length);
    const workerRegistry = connectWorkerRegistry(contracts.workerRegistry, provider);
    for (const account of accounts) {
      expect(new Wallet(account.privateKey).address).toBe(account.address);
      expect(await provider.getBalance(account.address)).toBeGreaterThan(parseEther('1000'));
      expect(await workerRegistry.isActive(account.address)).toBe(false);
    }
    const jobRegistry = connectJobRegistry(contracts.jobRegistry, provider);
    for (const account of accounts.filter((candidate) => candidate.role !== 'wallet'))
      expect(await jobRegistry.prepaidBalanceOf(account.address)).toBe(0n);
  });

  it("names the service signer's three operators, accepted on chain, and describes each", async () => {
    const operators = operatorAccounts(devnet.description.accounts);
    expect(operators.map((operator) => operator.purpose)).toEqual([
      "service operator 1: sends the service's blob transactions (job submissions)",
      "service operator 2: sends the service's blob transactions (job submissions)",
      "service operator 3: sends the service's plain transactions (sessions, refunds, releases)",
    ]);
    const jobRegistry = connectJobRegistry(devnet.description.contracts.jobRegistry, provider);
    const signer = accountWithRole(devnet.description.accounts, 'service-signer').address;
    for (const operator of operators) expect(await jobRegistry.principalOf(operator.address)).toBe(signer);
    // Nobody else acts for anyone but the facilitator's operator.
    for (const account of devnet.description.accounts.filter(
      (candidate) => candidate.role !== 'operator' && candidate.role !== 'facilitator-operator',
    ))
      expect(await jobRegistry.principalOf(account.address)).toBe(account.address);
  });

  it('has the facilitator authorized by the service signer, with its operator accepted', async () => {
    const { accounts, contracts } = devnet.description;
    const jobRegistry = connectJobRegistry(contracts.jobRegistry, provider);
    const signer = accountWithRole(accounts, 'service-signer').address;
    const facilitator = accountWithRole(accounts, 'facilitator').address;
    expect(await jobRegistry.isDelegateAuthorized(signer, facilitator)).toBe(true);
    const facilitatorOperators = accounts.filter((account) => account.role === 'facilitator-operator');
    expect(facilitatorOperators).toHaveLength(1);
    expect(await jobRegistry.principalOf(facilitatorOperators[0]!.address)).toBe(facilitator);
    // The facilitator pays nothing itself: it only settles from payers' balances.
    expect(await jobRegistry.prepaidBalanceOf(facilitator)).toBe(0n);
  });

  it('has user wallet 1 deposited with the service signer authorized, and the other wallets bare for the 402 flow', async () => {
    await expectPreparedAccounts(devnet.description, provider);
    const wallets = devnet.description.accounts.filter((account) => account.role === 'wallet');
    expect(wallets[0]!.purpose).toContain('deposited 1 ETH and authorized the service signer');
    for (const wallet of wallets.slice(1)) {
      expect(wallet.purpose).toContain(
        'funded with ETH, no deposit and no delegate: its API-key calls get 402 until it sends the `accepts` transaction',
      );
    }
  });

  it('has warmed anvil up: a blob transaction is on chain already and the next one is quick', async () => {
    const latest = await provider.getBlockNumber();
    let blobTransactions = 0;
    for (let number = 0; number <= latest; number += 1) {
      const block = await provider.getBlock(number, true);
      blobTransactions += block!.prefetchedTransactions.filter((tx) => tx.type === 3).length;
    }
    expect(blobTransactions).toBe(1);

    const wallet = new Wallet(accountWithRole(devnet.description.accounts, 'wallet').privateKey, provider);
    const started = Date.now();
    const receipt = await (await sendWithBlobs(wallet, { to: wallet.address }, 1)).wait();
    // Cold, anvil alone spends ~3.5 s loading its KZG setup on the first blob; warm, the whole send
    // takes well under a second, so this bound separates the two even on a busy machine.
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(receipt?.blobGasUsed).toBe(131_072n);
  });

  it('lets another process use the chain from its description file and RPC_URL', async () => {
    const external = await describeExternalChain(devnet.description.rpcUrl, descriptionPath);
    expect(external).toEqual(devnet.description);
  });

  it('refuses to start on a port that is taken, and writes no description', async () => {
    const port = Number(new URL(devnet.description.rpcUrl).port);
    const otherPath = join(directory, 'other.json');
    await expect(startDevnet({ port, descriptionPath: otherPath })).rejects.toThrow(/anvil exited/);
    expect(existsSync(otherPath)).toBe(false);
  });
});

describe('startDevnet options and stop', () => {
  it('starts on a given port with a block time, other models and wallets, and stop() cleans up', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'svc-devnet-test-'));
    const descriptionPath = join(directory, 'devnet.json');
    const port = await freePort();
    const devnet = await startDevnet({
      port,
      blockTimeSeconds: 1,
      chainId: 900_001,
      walletCount: 1,
      models: [{ name: 'gemma3:270m', feeWei: 7n }],
      descriptionPath,
    });
    const provider = createDevProvider(devnet.description.rpcUrl, devnet.description.chainId);
    try {
      expect(devnet.description).toMatchObject({
        rpcUrl: `http://127.0.0.1:${port}`,
        chainId: 900_001,
        blockTimeSeconds: 1,
        models: [{ name: 'gemma3:270m', modelId: modelIdOf('gemma3:270m'), feeWei: '7' }],
      });
      expect(devnet.description.accounts.map((account) => account.role)).toEqual([
        'owner',
        'service-signer',
        'worker',
        'worker',
        'wallet',
        'operator',
        'operator',
        'operator',
        'facilitator',
        'facilitator-operator',
      ]);
      // Set up with interval mining too: each step waits for its block.
      await expectPreparedAccounts(devnet.description, provider);
      // Interval mining: blocks keep coming with no transaction sent.
      const before = await provider.getBlockNumber();
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      expect(await provider.getBlockNumber()).toBeGreaterThan(before);
    } finally {
      provider.destroy();
      await devnet.stop();
    }
    expect(isAlive(devnet.description.anvilPid)).toBe(false);
    expect(existsSync(descriptionPath)).toBe(false);
    await devnet.stop();
    rmSync(directory, { recursive: true, force: true });
  }, 60_000);

  it('resumes a kept chain, but deploys afresh when the contract code changed since it was kept', async () => {
    const stateDir = mkdtempSync(join(tmpdir(), 'svc-devnet-kept-'));
    try {
      const first = await startDevnet({ stateDir });
      const deployed = first.description.contracts.jobRegistry;
      await first.stop();
      const resumed = await startDevnet({ stateDir });
      expect(resumed.resumed).toBe(true);
      expect(resumed.discardedStaleChain).toBe(false);
      expect(resumed.description.contracts.jobRegistry).toBe(deployed);
      expect(resumed.description.accounts).toEqual(first.description.accounts);
      // Not set up again (that would revert: the operators are taken), but kept as the first run left it.
      const provider = createDevProvider(resumed.description.rpcUrl, resumed.description.chainId);
      try {
        await expectPreparedAccounts(resumed.description, provider);
      } finally {
        provider.destroy();
      }
      await resumed.stop();

      // As if the chain had been kept by the setup code before operators and deposits (the same
      // contracts, fingerprinted without a setup version).
      writeFileSync(
        join(stateDir, 'contracts.sha256'),
        `${createHash('sha256').update(jobRegistryBytecode).update(workerRegistryBytecode).digest('hex')}\n`,
      );
      const older = await startDevnet({ stateDir });
      expect(older.resumed).toBe(false);
      expect(older.discardedStaleChain).toBe(true);
      await older.stop();

      // As if the chain had been kept by a checkout with other contract code.
      writeFileSync(join(stateDir, 'contracts.sha256'), `${'0'.repeat(64)}\n`);
      const fresh = await startDevnet({ stateDir });
      expect(fresh.resumed).toBe(false);
      expect(fresh.discardedStaleChain).toBe(true);
      expect(readFileSync(join(stateDir, 'contracts.sha256'), 'utf8')).not.toContain('0'.repeat(64));
      await fresh.stop();
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  }, 90_000);

  it('keeps a description file that a newer devnet has taken over', () => {
    const directory = mkdtempSync(join(tmpdir(), 'svc-devnet-test-'));
    const path = join(directory, 'devnet.json');
    try {
      writeFileSync(path, JSON.stringify(sampleDescription({ anvilPid: 4242 })));
      removeDevnetDescription(path, 4243);
      expect(existsSync(path)).toBe(true);
      removeDevnetDescription(path, 4242);
      expect(existsSync(path)).toBe(false);
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  });
});

describe('describeExternalChain', () => {
  it('refuses a description of another chain id, or of contracts the chain does not have', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'svc-devnet-test-'));
    const path = join(directory, 'devnet.json');
    const otherChain = await startAnvil({ chainId: 4242, accounts: 1 });
    const emptyChain = await startAnvil({ chainId: 31337, accounts: 1 });
    try {
      writeFileSync(path, JSON.stringify(sampleDescription({ chainId: 31337 })));
      await expect(describeExternalChain(otherChain.rpcUrl, path)).rejects.toThrow(
        /describes chain 31337, but .* is chain 4242/,
      );
      await expect(describeExternalChain(emptyChain.rpcUrl, path)).rejects.toThrow(/no JobRegistry at/);
      await expect(describeExternalChain(emptyChain.rpcUrl, join(directory, 'missing.json'))).rejects.toThrow(
        InvalidDevnetDescription,
      );
    } finally {
      await otherChain.stop();
      await emptyChain.stop();
      rmSync(directory, { recursive: true, force: true });
    }
  });
});

describe('parseDevnetDescription', () => {
  it('accepts a well-formed description and normalises addresses to their checksum form', () => {
    const description = sampleDescription({});
    const lowered = {
      ...description,
      contracts: { ...description.contracts, jobRegistry: JOB_REGISTRY.toLowerCase() },
    };
    expect(parseDevnetDescription(lowered).contracts.jobRegistry).toBe(JOB_REGISTRY);
  });

  it('names every field that is wrong', () => {
    const description = sampleDescription({});
    const broken = {
      ...description,
      version: 2,
      models: [{ ...description.models[0], feeWei: 100 }],
      contracts: { ...description.contracts, jobRegistry: '0x1234' },
    };
    let message = '';
    try {
      parseDevnetDescription(broken, 'broken.json');
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidDevnetDescription);
      message = (error as Error).message;
    }
    expect(message).toContain('broken.json is not a valid devnet description');
    expect(message).toMatch(/version/);
    expect(message).toMatch(/models\.0\.feeWei/);
    expect(message).toMatch(/contracts\.jobRegistry/);
  });
});

const JOB_REGISTRY = '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512';

function sampleDescription(overrides: { anvilPid?: number; chainId?: number }) {
  const owner = new Wallet('0x' + '11'.repeat(32));
  return {
    version: 1,
    rpcUrl: 'http://127.0.0.1:8545',
    chainId: overrides.chainId ?? 31337,
    blockTimeSeconds: null,
    anvilPid: overrides.anvilPid ?? 4242,
    startedAt: new Date().toISOString(),
    contracts: {
      jobRegistry: JOB_REGISTRY,
      workerRegistry: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
      deploymentBlock: 1,
    },
    parameters: {
      protocol: {
        ...DEFAULT_PROTOCOL_PARAMETERS,
        mismatchSlashWei: DEFAULT_PROTOCOL_PARAMETERS.mismatchSlashWei.toString(),
      },
      staking: { minStakeWei: '1', unbondingDelaySeconds: 1 },
    },
    models: [{ name: 'llama3.2:1b', modelId: modelIdOf('llama3.2:1b'), feeWei: '1' }],
    accounts: [{ role: 'owner', address: owner.address, privateKey: owner.privateKey, purpose: 'owner' }],
  };
}
