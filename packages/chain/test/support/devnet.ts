import { afterAll, beforeAll } from '@jest/globals';
import { parseEther, type JsonRpcProvider, type Wallet } from 'ethers';
import { deployContracts, type Deployment } from '@svc/contracts';
import { createDevProvider, startAnvil, DevWallet, type AnvilInstance } from '@svc/anvil';

export const MODEL = { name: 'llama3.2:1b', feeWei: parseEther('0.001') };

export interface Devnet {
  anvil: AnvilInstance;
  provider: JsonRpcProvider;
  deployment: Deployment;
  /** Dev account `index` as a wallet on the provider (0 deployed the contracts). */
  wallet(index: number): Wallet;
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
}

/** One anvil per test file, blobs warmed up, contracts deployed with one model. */
export function useDevnet(): () => Devnet {
  let devnet: Devnet | undefined;
  beforeAll(async () => {
    const anvil = await startAnvil({ accounts: 12, warmBlobs: true });
    try {
      const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
      const wallet = (index: number) => new DevWallet(anvil.accounts[index]!.privateKey, provider);
      const deployment = await deployContracts(wallet(0), { models: [MODEL] });
      devnet = {
        anvil,
        provider,
        deployment,
        wallet,
        rpc: (method, params = []) => provider.send(method, params),
      };
    } catch (error) {
      await anvil.stop();
      throw error;
    }
  }, 60_000);
  afterAll(async () => {
    devnet?.provider.destroy();
    await devnet?.anvil.stop();
  });
  return () => {
    if (!devnet) throw new Error('devnet not started');
    return devnet;
  };
}
