import { describe, expect, it } from '@jest/globals';
import type { LeaseGranted } from '../../../src/store/index.js';
import { concurrently, sleep, uniqueKey, type UseFixture } from './fixture.js';

export function concurrencyLeasesContract(use: UseFixture): void {
  describe('concurrency', () => {
    it('grants exactly `limit` of 200 concurrent acquires across replicas', async () => {
      const { replicas } = use();
      const [first, second] = replicas;
      const key = uniqueKey('leases');
      const outcomes = await concurrently(replicas, 200, (store) =>
        store.concurrency.acquire(key, 5, 60_000),
      );

      const granted = outcomes.filter((o): o is LeaseGranted => o.granted);
      expect(granted).toHaveLength(5);
      expect(new Set(granted.map((g) => g.leaseId)).size).toBe(5);
      for (const refused of outcomes.filter((o) => !o.granted)) {
        expect(refused).toMatchObject({ granted: false, active: 5 });
        if (!refused.granted) expect(refused.retryAfterMs).toBeGreaterThan(0);
      }
      expect(await first.concurrency.count(key)).toBe(5);

      await Promise.all(granted.map((g) => second.concurrency.release(key, g.leaseId)));
      expect(await first.concurrency.count(key)).toBe(0);
      const again = await concurrently(replicas, 20, (store) => store.concurrency.acquire(key, 5, 60_000));
      expect(again.filter((o) => o.granted)).toHaveLength(5);
    });

    it('frees the slot of a lease nobody released once its TTL passes', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('leases');
      const abandoned = await first.concurrency.acquire(key, 1, 300);
      expect(abandoned.granted).toBe(true);
      const refused = await second.concurrency.acquire(key, 1, 300);
      expect(refused.granted).toBe(false);
      if (refused.granted) return;
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(300);

      await sleep(refused.retryAfterMs + 50);
      expect(await first.concurrency.count(key)).toBe(0);
      expect((await second.concurrency.acquire(key, 1, 300)).granted).toBe(true);
    });

    it('renews a live lease past its first TTL, and not once it is gone', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('leases');
      const lease = await first.concurrency.acquire(key, 1, 300);
      if (!lease.granted) throw new Error('first acquire must be granted');
      await sleep(200);
      expect(await second.concurrency.renew(key, lease.leaseId, 400)).toBe(true);
      await sleep(200);
      expect((await second.concurrency.acquire(key, 1, 300)).granted).toBe(false);
      expect(await first.concurrency.count(key)).toBe(1);

      expect(await second.concurrency.release(key, lease.leaseId)).toBe(true);
      expect(await first.concurrency.release(key, lease.leaseId)).toBe(false);
      expect(await first.concurrency.renew(key, lease.leaseId, 400)).toBe(false);
      expect(await first.concurrency.renew(key, 'never-granted', 400)).toBe(false);
      expect((await second.concurrency.acquire(key, 1, 300)).granted).toBe(true);
    });

    it('reports an expired lease as not live on release', async () => {
      const [store] = use().replicas;
      const key = uniqueKey('leases');
      const lease = await store.concurrency.acquire(key, 2, 150);
      if (!lease.granted) throw new Error('first acquire must be granted');
      await sleep(250);
      expect(await store.concurrency.release(key, lease.leaseId)).toBe(false);
    });
  });
}
