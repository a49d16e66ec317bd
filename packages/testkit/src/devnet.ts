import { afterAll, afterEach, beforeAll, beforeEach } from '@jest/globals';
import type { JsonRpcProvider } from 'ethers';
import { ChainClock, DevWallet, createDevProvider, startAnvil, type AnvilInstance } from '@svc/anvil';
import { deployContracts, type DeployConfig, type Deployment } from '@svc/contracts';

export interface DevnetOptions extends DeployConfig {
  /** Funded dev accounts (default 12); account 0 deploys the contracts. */
  accounts?: number;
  /** Pay anvil's KZG setup (~3.5 s, on the first blob transaction) before the tests, not in one. */
  warmBlobs?: boolean;
  /**
   * Take a snapshot before each test and revert to it after, so every test starts from the freshly
   * deployed chain whatever the one before it mined, left pending or switched off.
   */
  snapshots?: boolean;
}

export interface Devnet {
  anvil: AnvilInstance;
  provider: JsonRpcProvider;
  deployment: Deployment;
  /** Dev account `index` as a wallet on the provider (0 deployed the contracts). */
  wallet(index: number): DevWallet;
  rpc<T = unknown>(method: string, params?: unknown[]): Promise<T>;
}

/**
 * One anvil per test file with the contracts deployed by dev account 0 (`models`, `protocol` and
 * `staking` as `deployContracts` takes them). Call it at the top of a test file or a describe block;
 * the getter it returns throws until the devnet is up.
 */
export function useDevnet(options: DevnetOptions = {}): () => Devnet {
  const { accounts = 12, warmBlobs = false, snapshots = false, ...deploy } = options;
  let devnet: Devnet | undefined;

  beforeAll(async () => {
    const anvil = await startAnvil({ accounts, warmBlobs });
    try {
      const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
      const wallet = (index: number): DevWallet => {
        const account = anvil.accounts[index];
        if (!account)
          throw new RangeError(`the devnet has ${anvil.accounts.length} accounts, not ${index + 1}`);
        return new DevWallet(account.privateKey, provider);
      };
      const deployment = await deployContracts(wallet(0), deploy);
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

  if (snapshots) {
    let snapshot: string | undefined;
    beforeEach(async () => {
      snapshot = await new ChainClock(current().provider).snapshot();
    });
    afterEach(async () => {
      const { provider, rpc } = current();
      // A failed test may leave transactions pending; they must not be mined into the next one.
      await rpc('anvil_dropAllTransactions');
      await rpc('evm_setAutomine', [true]);
      if (snapshot !== undefined) await new ChainClock(provider).revert(snapshot);
      snapshot = undefined;
    });
  }

  function current(): Devnet {
    if (!devnet) throw new Error('devnet not started');
    return devnet;
  }
  return current;
}
