import { describe, expect, it } from '@jest/globals';
import { concurrently, uniqueKey, type UseFixture } from './fixture.js';

export function revocationsContract(use: UseFixture): void {
  describe('revocations', () => {
    it('shows a mark to every replica as soon as mark resolves', async () => {
      const [first, second] = use().replicas;
      const keyId = uniqueKey('key');
      expect(await second.revocations.isMarked(keyId)).toBe(false);
      await first.revocations.mark(keyId);
      expect(await second.revocations.isMarked(keyId)).toBe(true);
      await second.revocations.mark(keyId);
      expect(await first.revocations.isMarked(keyId)).toBe(true);
    });

    it('answers a batch with the marked ids among it', async () => {
      const [first, second] = use().replicas;
      const [a, b, c] = [uniqueKey('key'), uniqueKey('key'), uniqueKey('key')];
      await first.revocations.mark(a);
      await first.revocations.mark(c);
      expect(await second.revocations.markedAmong([a, b, c])).toEqual(new Set([a, c]));
      expect(await second.revocations.markedAmong([b])).toEqual(new Set());
      expect(await second.revocations.markedAmong([])).toEqual(new Set());
    });

    describe('hitByMarker', () => {
      const windows = (limit = 3) => ({
        ifClear: { key: uniqueKey('clear'), limit, windowMs: 60_000 },
        ifMarked: { key: uniqueKey('marked'), limit: 2, windowMs: 30_000 },
      });

      it("counts an unmarked id's hit in its clear window, the one rateWindows.hit counts under that key", async () => {
        const [first, second] = use().replicas;
        const id = uniqueKey('key');
        const { ifClear, ifMarked } = windows();
        expect((await first.rateWindows.hit(ifClear.key, ifClear.limit, ifClear.windowMs)).allowed).toBe(
          true,
        );

        const outcomes = [];
        for (let i = 0; i < 3; i++)
          outcomes.push(await second.revocations.hitByMarker(id, { ifClear, ifMarked }));
        expect(outcomes.map((outcome) => outcome.marked)).toEqual([false, false, false]);
        expect(outcomes.map(({ verdict }) => [verdict.allowed, verdict.remaining])).toEqual([
          [true, 1],
          [true, 0],
          [false, 0],
        ]);
        const refused = outcomes[2]?.verdict;
        expect(refused?.limit).toBe(3);
        expect(refused?.retryAfterMs).toBeGreaterThan(50_000);
        expect(refused?.retryAfterMs).toBeLessThanOrEqual(60_000);
        // The clear window is full for rateWindows.hit too, and the marked window was never touched.
        expect((await first.rateWindows.hit(ifClear.key, ifClear.limit, ifClear.windowMs)).allowed).toBe(
          false,
        );
        expect(await first.rateWindows.hit(ifMarked.key, 2, 30_000)).toMatchObject({
          allowed: true,
          remaining: 1,
        });
      });

      it("counts a marked id's hit in its marked window only, from the call right after the mark", async () => {
        const [first, second] = use().replicas;
        const id = uniqueKey('key');
        const { ifClear, ifMarked } = windows(1);
        expect(await second.revocations.hitByMarker(id, { ifClear, ifMarked })).toMatchObject({
          marked: false,
          verdict: { allowed: true, remaining: 0 },
        });
        await first.revocations.mark(id);

        const outcomes = [];
        for (let i = 0; i < 3; i++)
          outcomes.push(await second.revocations.hitByMarker(id, { ifClear, ifMarked }));
        expect(outcomes.map((outcome) => outcome.marked)).toEqual([true, true, true]);
        expect(outcomes.map(({ verdict }) => [verdict.allowed, verdict.remaining, verdict.limit])).toEqual([
          [true, 1, 2],
          [true, 0, 2],
          [false, 0, 2],
        ]);
        expect(outcomes[2]?.verdict.retryAfterMs).toBeGreaterThan(20_000);
        expect(outcomes[2]?.verdict.retryAfterMs).toBeLessThanOrEqual(30_000);
        // The clear window still holds only the hit from before the mark.
        expect((await first.rateWindows.hit(ifClear.key, 2, 60_000)).remaining).toBe(0);
      });

      it('lets exactly `limit` of 50 concurrent hits through across replicas', async () => {
        const { replicas } = use();
        const id = uniqueKey('key');
        const { ifClear, ifMarked } = windows(7);
        const outcomes = await concurrently(replicas, 50, (store) =>
          store.revocations.hitByMarker(id, { ifClear, ifMarked }),
        );
        expect(outcomes.filter(({ verdict }) => verdict.allowed)).toHaveLength(7);
        expect(outcomes.every((outcome) => !outcome.marked)).toBe(true);
      });

      it("counts in a clear window that shares the id as hash tag (the gateway's layout) as in any other", async () => {
        const { replicas } = use();
        const [first, second] = replicas;
        const id = uniqueKey('key');
        const ifClear = { key: `v1:key:{${id}}`, limit: 5, windowMs: 60_000 };
        const ifMarked = { key: uniqueKey('marked'), limit: 3, windowMs: 30_000 };
        const outcomes = await concurrently(replicas, 20, (store) =>
          store.revocations.hitByMarker(id, { ifClear, ifMarked }),
        );
        expect(outcomes.filter(({ verdict }) => verdict.allowed)).toHaveLength(5);
        expect(outcomes.every((outcome) => !outcome.marked)).toBe(true);
        expect((await first.rateWindows.hit(ifClear.key, 6, 60_000)).remaining).toBe(0);

        await second.revocations.mark(id);
        const marked = await concurrently(replicas, 10, (store) =>
          store.revocations.hitByMarker(id, { ifClear, ifMarked }),
        );
        expect(marked.every((outcome) => outcome.marked)).toBe(true);
        expect(marked.filter(({ verdict }) => verdict.allowed)).toHaveLength(3);
        expect(marked.every(({ verdict }) => verdict.limit === 3)).toBe(true);
        // The clear window saw nothing after the mark: still the 5 hits and the one above.
        expect((await first.rateWindows.hit(ifClear.key, 7, 60_000)).remaining).toBe(0);
      });

      it('rejects an empty id or key and a limit or window that is not a positive integer', async () => {
        const [store] = use().replicas;
        const good = windows();
        const calls = [
          store.revocations.hitByMarker('', good),
          store.revocations.hitByMarker('id', { ...good, ifClear: { ...good.ifClear, key: '' } }),
          store.revocations.hitByMarker('id', { ...good, ifClear: { ...good.ifClear, limit: 0 } }),
          store.revocations.hitByMarker('id', { ...good, ifMarked: { ...good.ifMarked, windowMs: 1.5 } }),
        ];
        for (const call of calls) await expect(call).rejects.toThrow(RangeError);
      });
    });
  });
}
