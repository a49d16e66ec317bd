import { afterAll, afterEach, beforeAll, beforeEach } from '@jest/globals';
import { ChainClock } from '@svc/anvil';
import { startTestDevnet, type Devnet, type DevnetOptions, type RunningDevnet } from './test-devnet.js';

/**
 * One anvil per test file with the contracts deployed by dev account 0 (`models`, `protocol` and
 * `staking` as `deployContracts` takes them). Call it at the top of a test file or a describe block;
 * the getter it returns throws until the devnet is up.
 */
export function useDevnet(options: DevnetOptions = {}): () => Devnet {
  const { snapshots = false, ...devnetOptions } = options;
  let devnet: RunningDevnet | undefined;

  beforeAll(async () => {
    devnet = await startTestDevnet(devnetOptions);
  }, 60_000);

  afterAll(async () => {
    await devnet?.stop();
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
