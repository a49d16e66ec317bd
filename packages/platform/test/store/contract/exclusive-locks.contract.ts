import { describe, expect, it } from '@jest/globals';
import { concurrently, sleep, uniqueKey, type UseFixture } from './fixture.js';

export function exclusiveLocksContract(use: UseFixture): void {
  describe('locks', () => {
    it('gives a lock to exactly one of 50 concurrent owners; the rest learn who holds it', async () => {
      const { replicas } = use();
      const key = uniqueKey('lock');
      const attempts = await concurrently(replicas, 50, (store, i) =>
        store.locks.tryAcquire(key, `owner-${i}`, 60_000),
      );
      const winners = attempts.flatMap((a, i) => (a.acquired ? [`owner-${i}`] : []));
      expect(winners).toHaveLength(1);
      const winner = winners[0];
      for (const attempt of attempts.filter((a) => !a.acquired)) {
        expect(attempt).toMatchObject({ acquired: false, holderId: winner });
        if (!attempt.acquired) expect(attempt.retryAfterMs).toBeGreaterThan(0);
      }
      expect(await replicas[1].locks.holder(key)).toBe(winner);
    });

    it('lets only the owner renew or release, and the owner re-acquire', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('lock');
      expect((await first.locks.tryAcquire(key, 'job-a', 60_000)).acquired).toBe(true);
      expect((await second.locks.tryAcquire(key, 'job-a', 60_000)).acquired).toBe(true);
      expect(await second.locks.renew(key, 'job-b', 60_000)).toBe(false);
      expect(await second.locks.release(key, 'job-b')).toBe(false);
      expect(await first.locks.holder(key)).toBe('job-a');

      expect(await second.locks.renew(key, 'job-a', 60_000)).toBe(true);
      expect(await second.locks.release(key, 'job-a')).toBe(true);
      expect(await first.locks.holder(key)).toBeNull();
      expect(await first.locks.release(key, 'job-a')).toBe(false);
      expect((await first.locks.tryAcquire(key, 'job-b', 60_000)).acquired).toBe(true);
    });

    it('lapses at its TTL unless renewed, and a lapsed owner cannot touch the new holder', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('lock');
      expect((await first.locks.tryAcquire(key, 'job-a', 300)).acquired).toBe(true);
      await sleep(200);
      expect(await first.locks.renew(key, 'job-a', 300)).toBe(true);
      await sleep(200);
      const blocked = await second.locks.tryAcquire(key, 'job-b', 300);
      expect(blocked.acquired).toBe(false);
      if (blocked.acquired) return;
      expect(blocked.retryAfterMs).toBeLessThanOrEqual(300);

      await sleep(blocked.retryAfterMs + 50);
      expect((await second.locks.tryAcquire(key, 'job-b', 60_000)).acquired).toBe(true);
      expect(await first.locks.renew(key, 'job-a', 300)).toBe(false);
      expect(await first.locks.release(key, 'job-a')).toBe(false);
      expect(await first.locks.holder(key)).toBe('job-b');
    });
  });
}
