import { afterAll, beforeAll } from '@jest/globals';
import type { JsonRpcProvider, Wallet } from 'ethers';
import { deployContracts, type Deployment, type ProtocolParameters } from '@svc/contracts';
import { createDevProvider, startAnvil, DevWallet, type AnvilInstance } from '@svc/anvil';

import { MODEL, OTHER_MODEL } from './models.js';

export { MODEL, OTHER_MODEL };

export interface Devnet {
  anvil: AnvilInstance;
  provider: JsonRpcProvider;
  deployment: Deployment;
  /** Dev account `index` as a wallet on the provider (0 deployed the contracts). */
  wallet(index: number): Wallet;
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
}

/** One anvil per test file, blobs warmed up when asked, contracts deployed with two models. */
export function useDevnet(
  options: { warmBlobs?: boolean; protocol?: Partial<ProtocolParameters> } = {},
): () => Devnet {
  let devnet: Devnet | undefined;
  beforeAll(async () => {
    const anvil = await startAnvil({ accounts: 12, warmBlobs: options.warmBlobs ?? false });
    try {
      const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
      const wallet = (index: number) => new DevWallet(anvil.accounts[index]!.privateKey, provider);
      const deployment = await deployContracts(wallet(0), {
        models: [MODEL, OTHER_MODEL],
        ...(options.protocol ? { protocol: options.protocol } : {}),
      });
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
