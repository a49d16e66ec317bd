import { describe, expect, it } from '@jest/globals';
import { concurrently, sleep, uniqueKey, type UseFixture } from './fixture.js';

export function expiringValuesContract(use: UseFixture): void {
  describe('values', () => {
    it('stores, overwrites, reads and deletes values across replicas', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('value');
      expect(await first.values.get(key)).toBeNull();
      await first.values.set(key, 'session-1', 60_000);
      expect(await second.values.get(key)).toBe('session-1');
      await second.values.set(key, 'session-2', 60_000);
      expect(await first.values.get(key)).toBe('session-2');
      expect(await first.values.delete(key)).toBe(true);
      expect(await second.values.delete(key)).toBe(false);
      expect(await second.values.get(key)).toBeNull();
    });

    it('round-trips any string, including empty and non-ASCII', async () => {
      const [first, second] = use().replicas;
      for (const value of ['', 'naïve ✓ 日本語 🦊', '{"json":true}', 'line\nbreak\u0000nul']) {
        const key = uniqueKey('value');
        await first.values.set(key, value, 60_000);
        expect(await second.values.get(key)).toBe(value);
      }
    });

    it('forgets a value once its TTL passes', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('value');
      await first.values.set(key, 'short-lived', 200);
      expect(await second.values.get(key)).toBe('short-lived');
      await sleep(300);
      expect(await second.values.get(key)).toBeNull();
      expect(await first.values.take(key)).toBeNull();
    });

    it('stores exactly one of 50 concurrent setIfAbsent calls, and again once it lapsed', async () => {
      const { replicas } = use();
      const key = uniqueKey('value');
      const stored = await concurrently(replicas, 50, (store, i) =>
        store.values.setIfAbsent(key, `writer-${i}`, 250),
      );
      const winners = stored.flatMap((won, i) => (won ? [`writer-${i}`] : []));
      expect(winners).toHaveLength(1);
      expect(await replicas[1].values.get(key)).toBe(winners[0]);

      await sleep(350);
      expect(await replicas[0].values.setIfAbsent(key, 'later', 60_000)).toBe(true);
      expect(await replicas[1].values.get(key)).toBe('later');
    });

    it('hands a single-use value to exactly one of 50 concurrent takers', async () => {
      const { replicas } = use();
      const key = uniqueKey('nonce');
      await replicas[0].values.set(key, 'challenge-nonce', 60_000);
      const taken = await concurrently(replicas, 50, (store) => store.values.take(key));
      expect(taken.filter((value) => value !== null)).toEqual(['challenge-nonce']);
      expect(await replicas[1].values.get(key)).toBeNull();
    });

    it('deletes with compareAndDelete only while the expected value is there', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('reservation');
      await first.values.set(key, 'request-1', 60_000);
      expect(await second.values.compareAndDelete(key, 'request-2')).toBe(false);
      expect(await first.values.get(key)).toBe('request-1');
      expect(await second.values.compareAndDelete(key, 'request-1')).toBe(true);
      expect(await first.values.get(key)).toBeNull();
      expect(await first.values.compareAndDelete(key, 'request-1')).toBe(false);
    });

    it('rejects a TTL that is not a positive integer', async () => {
      const [store] = use().replicas;
      await expect(store.values.set(uniqueKey('value'), 'v', 0)).rejects.toThrow(RangeError);
      await expect(store.values.setIfAbsent(uniqueKey('value'), 'v', -5)).rejects.toThrow(RangeError);
    });
  });
}
