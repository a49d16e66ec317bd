import { afterAll, afterEach, beforeAll, beforeEach } from '@jest/globals';
import type { JsonRpcProvider } from 'ethers';
import { ChainClock, DevWallet, createDevProvider, startAnvil, type AnvilInstance } from '@svc/anvil';
import { connectJobRegistry, connectWorkerRegistry } from '../../src/connect.js';
import { deployContracts, type DeployConfig, type Deployment } from '../../src/deploy.js';
import type { JobRegistry, WorkerRegistry } from '../../src/gen/index.js';

export const ACTORS = [
  'owner',
  'service',
  'user',
  'otherUser',
  'worker',
  'otherWorker',
  'operator',
  'facilitator',
  'stranger',
] as const;
export type Actor = (typeof ACTORS)[number];

export interface Chain {
  anvil: AnvilInstance;
  provider: JsonRpcProvider;
  clock: ChainClock;
  deployment: Deployment;
  /** A signer per role. The provider caches nothing, so each send reads the pending nonce afresh
   * (a local nonce counter would skip a nonce whenever a send fails its gas estimate). */
  signers: Record<Actor, DevWallet>;
  address: Record<Actor, string>;
  /** JobRegistry / WorkerRegistry connected as `actor`. */
  jobs(actor: Actor): JobRegistry;
  workers(actor: Actor): WorkerRegistry;
}

// Not @svc/testkit's useDevnet: this suite tests the deployment itself, and testkit depends on this package.
/**
 * One anvil per test file with the contracts deployed (setup optional); every test runs from the
 * same snapshot, so tests never see each other's state.
 */
export function useChain(
  config: DeployConfig = {},
  setup?: (chain: Chain) => Promise<void>,
  options: { sendsBlobs?: boolean } = {},
): () => Chain {
  let chain: Chain | undefined;
  let snapshot: string | undefined;

  beforeAll(async () => {
    const anvil = await startAnvil({
      accounts: ACTORS.length,
      // anvil loads its KZG setup on the first blob transaction (~3.5 s); pay it here, not in a test.
      warmBlobs: options.sendsBlobs ?? true,
      blockTimestampInterval: 1,
    });
    try {
      const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
      const signers = Object.fromEntries(
        ACTORS.map((actor, index) => [actor, new DevWallet(anvil.accounts[index]!.privateKey, provider)]),
      ) as Record<Actor, DevWallet>;
      const address = Object.fromEntries(ACTORS.map((actor) => [actor, signers[actor].address])) as Record<
        Actor,
        string
      >;
      const deployment = await deployContracts(signers.owner, config);
      const built: Chain = {
        anvil,
        provider,
        clock: new ChainClock(provider),
        deployment,
        signers,
        address,
        jobs: (actor) => connectJobRegistry(deployment.jobRegistryAddress, signers[actor]),
        workers: (actor) => connectWorkerRegistry(deployment.workerRegistryAddress, signers[actor]),
      };
      if (setup) await setup(built);
      chain = built;
    } catch (error) {
      await anvil.stop();
      throw error;
    }
  }, 60_000);

  afterAll(async () => {
    chain?.provider.destroy();
    await chain?.anvil.stop();
  });

  beforeEach(async () => {
    snapshot = await chain!.clock.snapshot();
  });

  afterEach(async () => {
    if (snapshot) await chain!.clock.revert(snapshot);
  });

  return () => {
    if (!chain) throw new Error('chain not started');
    return chain;
  };
}
