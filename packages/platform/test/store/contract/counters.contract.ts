import { describe, expect, it } from '@jest/globals';
import { StoreCommandError } from '../../../src/store/index.js';
import { concurrently, sleep, uniqueKey, type UseFixture } from './fixture.js';

export function countersContract(use: UseFixture): void {
  describe('counters', () => {
    it('adds up 200 concurrent increments across replicas without losing one', async () => {
      const { replicas } = use();
      const key = uniqueKey('counters');
      await concurrently(replicas, 200, (store, i) =>
        i % 2 === 0
          ? store.counters.increment(key, 'rate')
          : store.counters.increment(key, 'wei', 10n ** 15n),
      );
      expect(await replicas[0].counters.get(key)).toEqual({ rate: 100n, wei: 100n * 10n ** 15n });
    });

    it('returns each new value, exactly, up to the signed 64-bit limit', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('counters');
      expect(await first.counters.increment(key, 'spend', 2n ** 62n)).toBe(2n ** 62n);
      expect(await second.counters.increment(key, 'spend', 2n ** 62n - 1n)).toBe(2n ** 63n - 1n);
      expect(await first.counters.increment(key, 'other', -5)).toBe(-5n);
      expect(await first.counters.increment(key, 'other')).toBe(-4n);
    });

    it('refuses an overflowing increment and leaves the counter as it was', async () => {
      const [store] = use().replicas;
      const key = uniqueKey('counters');
      await store.counters.increment(key, 'spend', 2n ** 63n - 1n);
      await expect(store.counters.increment(key, 'spend', 1n)).rejects.toThrow(StoreCommandError);
      expect(await store.counters.get(key)).toEqual({ spend: 2n ** 63n - 1n });
      await expect(store.counters.increment(key, 'spend', 2n ** 63n)).rejects.toThrow(RangeError);
      await expect(store.counters.increment(key, 'spend', 1.5)).rejects.toThrow(RangeError);
    });

    it('reads a missing record as empty and deletes a record', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('counters');
      expect(await first.counters.get(key)).toEqual({});
      await first.counters.increment(key, 'rate', 3);
      expect(await second.counters.delete(key)).toBe(true);
      expect(await first.counters.get(key)).toEqual({});
      expect(await first.counters.delete(key)).toBe(false);
    });

    it('expires a record at the TTL given when it was created; later increments do not extend it', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('counters');
      await first.counters.increment(key, 'opens', 1, { ttlMs: 400 });
      await sleep(200);
      expect(await second.counters.increment(key, 'opens', 1, { ttlMs: 400 })).toBe(2n);
      await sleep(300);
      expect(await first.counters.get(key)).toEqual({});
    });
  });
}
