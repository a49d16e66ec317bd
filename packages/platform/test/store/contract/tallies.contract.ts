import { describe, expect, it } from '@jest/globals';
import { StoreCommandError, type Store, type TallyBatch } from '../../../src/store/index.js';
import { concurrently, sleep, uniqueKey, type UseFixture } from './fixture.js';

const LONG_CLAIM = { claimTtlMs: 60_000 };

function sum(counts: Readonly<Record<string, bigint>>): bigint {
  return Object.values(counts).reduce((total, value) => total + value, 0n);
}

/** Claims and acknowledges batches until the tally is empty; returns the counts delivered. */
async function drain(store: Store, tally: string, claimant: string): Promise<Record<string, bigint>> {
  const delivered: Record<string, bigint> = {};
  for (let batch = await store.tallies.claim(tally, claimant, LONG_CLAIM); batch !== null;) {
    for (const [field, value] of Object.entries(batch.counts))
      delivered[field] = (delivered[field] ?? 0n) + value;
    expect(await store.tallies.acknowledge(tally, batch.batchId)).toBe(true);
    batch = await store.tallies.claim(tally, claimant, LONG_CLAIM);
  }
  return delivered;
}

export function talliesContract(use: UseFixture): void {
  describe('tallies', () => {
    it('seals 300 concurrent increments from both replicas into one batch, and starts empty after it', async () => {
      const { replicas } = use();
      const tally = uniqueKey('tally');
      await concurrently(replicas, 300, (store, i) =>
        i % 3 === 0 ? store.tallies.add(tally, 'rate:key-a') : store.tallies.add(tally, 'spend_cap:key-b', 2),
      );
      const batch = await replicas[1].tallies.claim(tally, 'flusher', LONG_CLAIM);
      expect(batch?.counts).toEqual({ 'rate:key-a': 100n, 'spend_cap:key-b': 400n });
      expect(await replicas[0].tallies.acknowledge(tally, batch!.batchId)).toBe(true);
      expect(await replicas[0].tallies.claim(tally, 'flusher', LONG_CLAIM)).toBeNull();
    });

    it('puts every increment in exactly one acknowledged batch while flushers on both replicas run', async () => {
      const { replicas } = use();
      const tally = uniqueKey('tally');
      const acknowledged: TallyBatch[] = [];
      let adding = true;
      const flusher = async (store: Store, claimant: string) => {
        while (adding) {
          const batch = await store.tallies.claim(tally, claimant, { claimTtlMs: 5_000, maxFields: 3 });
          if (batch !== null && (await store.tallies.acknowledge(tally, batch.batchId)))
            acknowledged.push(batch);
          await sleep(1);
        }
      };
      const flushers = [flusher(replicas[0], 'replica-a'), flusher(replicas[1], 'replica-b')];
      // 2,000 increments in waves of 200 at once, over 5 fields, from both replicas.
      for (let wave = 0; wave < 10; wave += 1) {
        await concurrently(replicas, 200, (store, i) => store.tallies.add(tally, `field-${i % 5}`));
        // Lets the flushers in between waves too (an in-memory store settles a whole wave at once).
        await sleep(3);
      }
      adding = false;
      await Promise.all(flushers);
      const rest = await drain(replicas[0], tally, 'replica-a');

      const total = acknowledged.reduce((all, batch) => all + sum(batch.counts), 0n) + sum(rest);
      expect(total).toBe(2_000n);
      expect(acknowledged.length).toBeGreaterThan(1);
      expect(new Set(acknowledged.map((batch) => batch.batchId)).size).toBe(acknowledged.length);
      for (const batch of acknowledged) expect(Object.keys(batch.counts).length).toBeLessThanOrEqual(3);
    });

    it('hands a claimed batch to no other claimant until the claim lapses, and the same batch after it', async () => {
      const [first, second] = use().replicas;
      const tally = uniqueKey('tally');
      await first.tallies.add(tally, 'rate:key', 5);
      const claimed = await first.tallies.claim(tally, 'a', { claimTtlMs: 300 });
      expect(claimed?.counts).toEqual({ 'rate:key': 5n });

      // Increments after the seal wait for the next batch; nobody else may take the claimed one meanwhile.
      await second.tallies.add(tally, 'rate:key', 7);
      expect(await second.tallies.claim(tally, 'b', { claimTtlMs: 300 })).toBeNull();
      // The claimant itself retries the same batch (its delivery failed), which renews its claim.
      expect(await second.tallies.claim(tally, 'a', { claimTtlMs: 300 })).toEqual(claimed);

      await sleep(400);
      expect(await second.tallies.claim(tally, 'b', LONG_CLAIM)).toEqual(claimed);
      // A stale acknowledgement of another batch id changes nothing.
      expect(await first.tallies.acknowledge(tally, 'not-the-batch')).toBe(false);
      expect(await first.tallies.acknowledge(tally, claimed!.batchId)).toBe(true);
      expect(await second.tallies.acknowledge(tally, claimed!.batchId)).toBe(false);

      const next = await second.tallies.claim(tally, 'b', LONG_CLAIM);
      expect(next?.counts).toEqual({ 'rate:key': 7n });
      expect(next?.batchId).not.toBe(claimed!.batchId);
    });

    it('seals at most maxFields fields per batch and keeps the rest open', async () => {
      const [store] = use().replicas;
      const tally = uniqueKey('tally');
      const fields = Array.from({ length: 250 }, (_, i) => `field-${i}`);
      for (const field of fields) await store.tallies.add(tally, field, 3);
      const sizes: number[] = [];
      const delivered: Record<string, bigint> = {};
      for (;;) {
        const batch = await store.tallies.claim(tally, 'flusher', { claimTtlMs: 60_000, maxFields: 100 });
        if (batch === null) break;
        sizes.push(Object.keys(batch.counts).length);
        Object.assign(delivered, batch.counts);
        await store.tallies.acknowledge(tally, batch.batchId);
      }
      expect(sizes).toEqual([100, 100, 50]);
      expect(delivered).toEqual(Object.fromEntries(fields.map((field) => [field, 3n])));
    });

    it('reads the pending counts of the fields asked for, open and sealed with its id, and changes nothing', async () => {
      const [first, second] = use().replicas;
      const tally = uniqueKey('tally');
      expect(await first.tallies.pending(tally, ['a'])).toEqual({ open: {}, sealed: null });
      await first.tallies.add(tally, 'a', 3);
      await second.tallies.add(tally, 'b', 2);
      expect(await second.tallies.pending(tally, ['a', 'b', 'z'])).toEqual({
        open: { a: 3n, b: 2n },
        sealed: null,
      });
      const claimed = await first.tallies.claim(tally, 'flusher', LONG_CLAIM);
      await second.tallies.add(tally, 'a', 4);
      await second.tallies.add(tally, 'c');

      expect(await second.tallies.pending(tally, ['a', 'c', 'z'])).toEqual({
        open: { a: 4n, c: 1n },
        sealed: { batchId: claimed!.batchId, counts: { a: 3n } },
      });
      // A sealed batch holding none of the fields is not reported; no fields, nothing to read.
      expect(await first.tallies.pending(tally, ['c'])).toEqual({ open: { c: 1n }, sealed: null });
      expect(await first.tallies.pending(tally, [])).toEqual({ open: {}, sealed: null });
      // Reading took nothing: the claimant's retry gets the same batch, the open counts stay.
      expect(await first.tallies.claim(tally, 'flusher', LONG_CLAIM)).toEqual(claimed);

      expect(await first.tallies.acknowledge(tally, claimed!.batchId)).toBe(true);
      expect(await second.tallies.pending(tally, ['a', 'b'])).toEqual({ open: { a: 4n }, sealed: null });
      expect(await drain(first, tally, 'flusher')).toEqual({ a: 4n, c: 1n });
      expect(await first.tallies.pending(tally, ['a', 'c'])).toEqual({ open: {}, sealed: null });
      await expect(first.tallies.pending(tally, ['a', ''])).rejects.toThrow(RangeError);
    });

    it('shows every increment not yet acknowledged exactly once while both replicas add, seal and acknowledge', async () => {
      const { replicas } = use();
      const tally = uniqueKey('tally');
      const fields = ['f0', 'f1', 'f2'];
      let addsStarted = 0n;
      let addsDone = 0n;
      const batchTotals = new Map<string, bigint>();
      // Acknowledgements started (recorded before the call) and done (recorded after it).
      const acking = new Set<string>();
      const acknowledged = new Set<string>();
      const totalOf = (ids: Iterable<string>, except: string | undefined) =>
        [...ids].filter((id) => id !== except).reduce((all, id) => all + (batchTotals.get(id) ?? 0n), 0n);
      let running = true;
      const flusher = async (store: Store, claimant: string) => {
        while (running) {
          const batch = await store.tallies.claim(tally, claimant, { claimTtlMs: 5_000 });
          if (batch !== null) {
            batchTotals.set(batch.batchId, sum(batch.counts));
            acking.add(batch.batchId);
            if (await store.tallies.acknowledge(tally, batch.batchId)) acknowledged.add(batch.batchId);
          }
          await sleep(2);
        }
      };
      let reads = 0;
      const reader = async (store: Store) => {
        while (running) {
          const doneBefore = addsDone;
          const acknowledgedBefore = new Set(acknowledged);
          const { open, sealed } = await store.tallies.pending(tally, fields);
          const ackingAfter = new Set(acking);
          const seen = sum(open) + (sealed === null ? 0n : sum(sealed.counts));
          // Nothing counted twice: what is open or sealed is not in a batch acknowledged before the read.
          expect(seen + totalOf(acknowledgedBefore, sealed?.batchId)).toBeLessThanOrEqual(addsStarted);
          // Nothing missing: an increment done before the read is open, sealed, or in an acknowledged batch.
          expect(seen + totalOf(ackingAfter, sealed?.batchId)).toBeGreaterThanOrEqual(doneBefore);
          reads += 1;
          await sleep(1);
        }
      };
      const background = [
        flusher(replicas[0], 'replica-a'),
        flusher(replicas[1], 'replica-b'),
        reader(replicas[0]),
        reader(replicas[1]),
      ];
      for (let wave = 0; wave < 10; wave += 1) {
        await concurrently(replicas, 100, async (store, i) => {
          addsStarted += 1n;
          await store.tallies.add(tally, fields[i % fields.length] as string);
          addsDone += 1n;
        });
        await sleep(3);
      }
      running = false;
      await Promise.all(background);
      expect(reads).toBeGreaterThan(0);
      const rest = await drain(replicas[0], tally, 'replica-a');
      expect(totalOf(acknowledged, undefined) + sum(rest)).toBe(1_000n);
    });

    it('refuses increments that are not positive 64-bit integers, and overflow', async () => {
      const [store] = use().replicas;
      const tally = uniqueKey('tally');
      await expect(store.tallies.add(tally, 'f', 0)).rejects.toThrow(RangeError);
      await expect(store.tallies.add(tally, 'f', -1n)).rejects.toThrow(RangeError);
      await expect(store.tallies.add(tally, 'f', 1.5)).rejects.toThrow(RangeError);
      await expect(store.tallies.add(tally, 'f', 2n ** 63n)).rejects.toThrow(RangeError);
      await expect(store.tallies.claim(tally, 'c', { claimTtlMs: 0 })).rejects.toThrow(RangeError);
      await store.tallies.add(tally, 'f', 2n ** 63n - 1n);
      await expect(store.tallies.add(tally, 'f')).rejects.toThrow(StoreCommandError);
      expect(await drain(store, tally, 'c')).toEqual({ f: 2n ** 63n - 1n });
      expect(await store.tallies.claim(uniqueKey('tally'), 'c', LONG_CLAIM)).toBeNull();
    });
  });
}
