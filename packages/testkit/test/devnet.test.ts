import { describe, expect, it } from '@jest/globals';
import { parseEther } from 'ethers';
import { modelIdOf } from '@svc/contracts';
import { useDevnet } from '../src/index.js';

const MODEL = { name: 'testkit-model:1', feeWei: parseEther('0.001') };

describe('useDevnet', () => {
  const devnet = useDevnet({
    accounts: 3,
    models: [MODEL],
    protocol: { jobTimeoutSeconds: 42 },
    snapshots: true,
  });

  it('deploys the contracts with account 0 and the given models and parameters', async () => {
    const { anvil, deployment, wallet, rpc } = devnet();
    expect(anvil.accounts).toHaveLength(3);
    expect(await deployment.jobRegistry.owner()).toBe(wallet(0).address);
    expect(deployment.models).toEqual([{ ...MODEL, modelId: modelIdOf(MODEL.name) }]);
    expect(deployment.protocol.jobTimeoutSeconds).toBe(42);
    expect(await rpc<string>('eth_chainId')).toBe(`0x${anvil.chainId.toString(16)}`);
    expect(() => wallet(3)).toThrow(RangeError);
  });

  let blockInFirstTest = 0;
  it('lets a test mine blocks and switch automine off', async () => {
    const { provider, rpc, wallet } = devnet();
    blockInFirstTest = await provider.getBlockNumber();
    await rpc('evm_mine');
    await rpc('evm_setAutomine', [false]);
    await wallet(1).sendTransaction({ to: wallet(2).address, value: 1n });
    expect(await provider.getBlockNumber()).toBe(blockInFirstTest + 1);
  });

  it('starts every test from the deployed chain with automine on and nothing pending', async () => {
    const { provider, wallet } = devnet();
    expect(await provider.getBlockNumber()).toBe(blockInFirstTest);
    expect(await provider.getTransactionCount(wallet(1).address, 'pending')).toBe(0);
    await (await wallet(1).sendTransaction({ to: wallet(2).address, value: 1n })).wait();
    expect(await provider.getBlockNumber()).toBe(blockInFirstTest + 1);
  });
});
