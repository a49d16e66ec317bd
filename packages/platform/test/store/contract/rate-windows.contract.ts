import { describe, expect, it } from '@jest/globals';
import { concurrently, sleep, uniqueKey, type UseFixture } from './fixture.js';

export function rateWindowsContract(use: UseFixture): void {
  describe('rateWindows', () => {
    it('allows up to the limit, then refuses and says how long to wait', async () => {
      const [store] = use().replicas;
      const key = uniqueKey('rate');
      const before = Date.now();
      const verdicts = [];
      for (let i = 0; i < 5; i++) verdicts.push(await store.rateWindows.hit(key, 3, 60_000));

      expect(verdicts.map((v) => v.allowed)).toEqual([true, true, true, false, false]);
      expect(verdicts.map((v) => v.remaining)).toEqual([2, 1, 0, 0, 0]);
      expect(verdicts.every((v) => v.limit === 3)).toBe(true);
      expect(verdicts[0]?.retryAfterMs).toBe(0);
      for (const refused of verdicts.slice(3)) {
        expect(refused.retryAfterMs).toBeGreaterThan(50_000);
        expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
      }
      // Store clock and test clock are the same host's here; the bound only catches unit mistakes.
      expect(verdicts[0]?.resetAtMs).toBeGreaterThan(before + 55_000);
      expect(verdicts[0]?.resetAtMs).toBeLessThan(before + 65_000);
    });

    it('lets exactly `limit` of 100 concurrent hits through across replicas', async () => {
      const { replicas } = use();
      const key = uniqueKey('rate');
      const verdicts = await concurrently(replicas, 100, (store) => store.rateWindows.hit(key, 10, 60_000));

      const allowed = verdicts.filter((v) => v.allowed);
      expect(allowed).toHaveLength(10);
      expect(allowed.map((v) => v.remaining).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      for (const refused of verdicts.filter((v) => !v.allowed)) {
        expect(refused.remaining).toBe(0);
        expect(refused.retryAfterMs).toBeGreaterThan(0);
        expect(refused.retryAfterMs).toBeLessThanOrEqual(60_000);
      }
    });

    it('slides: each hit leaves the window on its own, and refused hits never count', async () => {
      const [first, second] = use().replicas;
      const key = uniqueKey('rate');
      expect((await first.rateWindows.hit(key, 2, 800)).allowed).toBe(true);
      await sleep(400);
      expect((await second.rateWindows.hit(key, 2, 800)).allowed).toBe(true);
      let refused = await first.rateWindows.hit(key, 2, 800);
      for (let i = 0; i < 5; i++) refused = await second.rateWindows.hit(key, 2, 800);
      expect(refused.allowed).toBe(false);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(400);

      await sleep(refused.retryAfterMs + 30);
      // The first hit left; the second (400 ms younger) still fills the other slot.
      const afterFirstLeft = await first.rateWindows.hit(key, 2, 800);
      expect(afterFirstLeft).toMatchObject({ allowed: true, remaining: 0 });
      expect((await second.rateWindows.hit(key, 2, 800)).allowed).toBe(false);
    });

    it('keeps a separate budget per key', async () => {
      const [store] = use().replicas;
      const [one, other] = [uniqueKey('rate'), uniqueKey('rate')];
      expect((await store.rateWindows.hit(one, 1, 60_000)).allowed).toBe(true);
      expect((await store.rateWindows.hit(one, 1, 60_000)).allowed).toBe(false);
      expect((await store.rateWindows.hit(other, 1, 60_000)).allowed).toBe(true);
    });

    it('rejects a limit or window that is not a positive integer', async () => {
      const [store] = use().replicas;
      await expect(store.rateWindows.hit(uniqueKey('rate'), 0, 1000)).rejects.toThrow(RangeError);
      await expect(store.rateWindows.hit(uniqueKey('rate'), 1, 1.5)).rejects.toThrow(RangeError);
      await expect(store.rateWindows.hit('', 1, 1000)).rejects.toThrow(RangeError);
    });
  });
}
