import { describe, expect, it } from '@jest/globals';
import { StoreClosedError } from '../../../src/store/index.js';
import { sleep, uniqueKey, type UseFixture } from './fixture.js';

export function lifecycleContract(use: UseFixture): void {
  describe('lifecycle', () => {
    it('answers ping while open', async () => {
      const [first, second] = use().replicas;
      await expect(first.ping()).resolves.toBeUndefined();
      await expect(second.ping()).resolves.toBeUndefined();
    });

    it('rejects every call after close with StoreClosedError, and ends blocked reads', async () => {
      const store = await use().openScratch();
      // The expectation is attached before closing: the blocked read may reject while close() is still
      // under way, and a rejection nobody handles yet fails the run whatever is awaited later.
      const blocked = expect(store.frames.read(uniqueKey('job'), null, { blockMs: 10_000 })).rejects.toThrow(
        StoreClosedError,
      );
      await sleep(100);
      await store.close();
      await store.close();

      await blocked;
      await expect(store.ping()).rejects.toThrow(StoreClosedError);
      await expect(store.values.get(uniqueKey('value'))).rejects.toThrow(StoreClosedError);
      await expect(store.rateWindows.hit(uniqueKey('rate'), 1, 1000)).rejects.toThrow(StoreClosedError);
      await expect(store.frames.read(uniqueKey('job'), null, { blockMs: 100 })).rejects.toThrow(
        StoreClosedError,
      );
      await expect(store.revocations.isMarked(uniqueKey('key'))).rejects.toThrow(StoreClosedError);
      await expect(store.tallies.add(uniqueKey('tally'), 'field')).rejects.toThrow(StoreClosedError);
    });
  });
}
