import { afterEach, beforeEach } from '@jest/globals';
import { ChainClock } from '@svc/anvil';
import type { Devnet } from './devnet.js';

/**
 * Takes an anvil snapshot before each test and reverts to it after, so every test starts from the
 * freshly deployed chain whatever the one before it mined (left pending, or mining switched off).
 */
export function useChainSnapshots(devnet: () => Devnet): void {
  let snapshot: string | undefined;
  beforeEach(async () => {
    snapshot = await new ChainClock(devnet().provider).snapshot();
  });
  afterEach(async () => {
    const { provider, rpc } = devnet();
    // A failed test may leave transactions pending; they must not be mined into the next one.
    await rpc('anvil_dropAllTransactions');
    await rpc('evm_setAutomine', [true]);
    if (snapshot !== undefined) await new ChainClock(provider).revert(snapshot);
    snapshot = undefined;
  });
}
