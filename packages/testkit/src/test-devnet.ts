// A devnet for tests and benchmarks, without jest: anvil with the contracts deployed. `useDevnet`
// (devnet.ts) runs one per test file; a script outside jest (a benchmark) calls `startTestDevnet`.
import type { JsonRpcProvider } from 'ethers';
import { DevWallet, createDevProvider, startAnvil, type AnvilInstance } from '@svc/anvil';
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
  /**
   * The chain connection the runner would open for this devnet (the shape of `@svc/runtime`'s
   * `ChainConnection`, to hand a target as `provided.chain`), through `rpcUrl` when a proxy stands in
   * front of anvil.
   */
  connection(rpcUrl?: string): DevnetConnection;
}

/** `@svc/runtime`'s `ChainConnection` of a test devnet: automining, and no role-account description. */
export interface DevnetConnection {
  readonly rpcUrl: string;
  readonly chainId: number;
  readonly blockTimeSeconds: null;
  readonly contracts: {
    readonly jobRegistry: string;
    readonly workerRegistry: string;
    readonly deploymentBlock: number;
  };
  readonly devnet: null;
}

/** A started devnet, and how to stop it. */
export interface RunningDevnet extends Devnet {
  stop(): Promise<void>;
}

/** Starts anvil with `accounts` funded dev accounts and deploys the contracts from account 0. */
export async function startTestDevnet(
  options: Omit<DevnetOptions, 'snapshots'> = {},
): Promise<RunningDevnet> {
  const { accounts = 12, warmBlobs = false, ...deploy } = options;
  const anvil = await startAnvil({ accounts, warmBlobs });
  const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
  try {
    const wallet = (index: number): DevWallet => {
      const account = anvil.accounts[index];
      if (!account)
        throw new RangeError(`the devnet has ${anvil.accounts.length} accounts, not ${index + 1}`);
      return new DevWallet(account.privateKey, provider);
    };
    const deployment = await deployContracts(wallet(0), deploy);
    return {
      anvil,
      provider,
      deployment,
      wallet,
      rpc: (method, params = []) => provider.send(method, params),
      connection: (rpcUrl = anvil.rpcUrl) => ({
        rpcUrl,
        chainId: anvil.chainId,
        blockTimeSeconds: null,
        contracts: {
          jobRegistry: deployment.jobRegistryAddress,
          workerRegistry: deployment.workerRegistryAddress,
          deploymentBlock: deployment.deploymentBlock,
        },
        devnet: null,
      }),
      stop: async () => {
        provider.destroy();
        await anvil.stop();
      },
    };
  } catch (error) {
    provider.destroy();
    await anvil.stop();
    throw error;
  }
}
