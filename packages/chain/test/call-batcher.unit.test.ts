import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from '@jest/globals';
import { CallBatcher, type BatchEntry, type BatchPolicy } from '../src/index.js';

/** A batcher of named requests whose batches are "prepared" until the test lets them go. */
function batcherOf(policy: Partial<BatchPolicy> = {}, capacity = 1_000) {
  const batches: { names: string[]; closedAt: number; sign: () => void; fail: (error: Error) => void }[] = [];
  const batcher = new CallBatcher<{ name: string; size: number }, string>(
    { lingerMs: 0, maxWaitMs: 200, maxCalls: 64, ...policy },
    (request) => request.size,
    capacity,
    (entries: BatchEntry<{ name: string; size: number }, string>[]) =>
      new Promise<void>((resolve, reject) => {
        batches.push({
          names: entries.map((entry) => entry.request.name),
          closedAt: Date.now(),
          sign: () => {
            for (const entry of entries) entry.resolve(`signed ${entry.request.name}`);
            resolve();
          },
          fail: reject,
        });
      }),
  );
  const add = (name: string, size = 10) => batcher.add({ name, size });
  return { batches, add };
}

describe('CallBatcher', () => {
  it('closes a request on an idle service into a batch of its own at once', async () => {
    const { batches, add } = batcherOf({ maxWaitMs: 5_000 });
    const started = Date.now();
    const signed = add('a');
    await sleep(5);
    expect(batches.map((batch) => batch.names)).toEqual([['a']]);
    expect(batches[0]!.closedAt - started).toBeLessThan(50);
    batches[0]!.sign();
    await expect(signed).resolves.toBe('signed a');
  });

  it('gathers the requests that arrive while a batch is prepared into the next one, closed when the one ahead is signed', async () => {
    const { batches, add } = batcherOf({ maxWaitMs: 5_000 });
    const first = add('a');
    await sleep(5);
    const later = [add('b'), add('c'), add('d')];
    await sleep(30);
    expect(batches.map((batch) => batch.names)).toEqual([['a']]);
    batches[0]!.sign();
    await first;
    await sleep(5);
    expect(batches.map((batch) => batch.names)).toEqual([['a'], ['b', 'c', 'd']]);
    batches[1]!.sign();
    await expect(Promise.all(later)).resolves.toEqual(['signed b', 'signed c', 'signed d']);
  });

  it('makes no request wait longer than maxWaitMs, even behind a batch that is still being prepared', async () => {
    const { batches, add } = batcherOf({ maxWaitMs: 60 });
    void add('a');
    await sleep(5);
    const queuedAt = Date.now();
    void add('b');
    await sleep(120);
    expect(batches.map((batch) => batch.names)).toEqual([['a'], ['b']]);
    const waited = batches[1]!.closedAt - queuedAt;
    expect(waited).toBeGreaterThanOrEqual(55);
    expect(waited).toBeLessThan(110);
  });

  it('closes a batch when the next request would not fit its blob, and at maxCalls', async () => {
    // The batch left open (c) closes after maxWaitMs, within the test.
    const bytes = batcherOf({ maxWaitMs: 300 }, 100);
    void bytes.add('ahead');
    await sleep(5);
    for (const name of ['a', 'b', 'c']) void bytes.add(name, 40);
    await sleep(5);
    // a and b fill 80 of 100 bytes: c starts the next batch.
    expect(bytes.batches.map((batch) => batch.names)).toEqual([['ahead'], ['a', 'b']]);

    const count = batcherOf({ maxWaitMs: 300, maxCalls: 2 });
    void count.add('ahead');
    await sleep(5);
    for (const name of ['a', 'b', 'c']) void count.add(name);
    await sleep(5);
    expect(count.batches.map((batch) => batch.names)).toEqual([['ahead'], ['a', 'b']]);
  });

  it('lingers for more requests when asked to, on an idle service too', async () => {
    const { batches, add } = batcherOf({ lingerMs: 40, maxWaitMs: 100 });
    void add('a');
    await sleep(10);
    void add('b');
    expect(batches).toEqual([]);
    await sleep(60);
    expect(batches.map((batch) => batch.names)).toEqual([['a', 'b']]);
  });

  it('lingers only while mayLinger says more requests are likely: alone, a request closes at once', async () => {
    let busy = false;
    const { batches, add } = batcherOf({ lingerMs: 150, maxWaitMs: 300, mayLinger: () => busy });
    const started = Date.now();
    void add('alone');
    await sleep(5);
    expect(batches.map((batch) => batch.names)).toEqual([['alone']]);
    expect(batches[0]!.closedAt - started).toBeLessThan(50);
    batches[0]!.sign();
    await sleep(5);

    busy = true;
    void add('a');
    await sleep(20);
    void add('b');
    expect(batches).toHaveLength(1);
    await sleep(200);
    expect(batches.map((batch) => batch.names)).toEqual([['alone'], ['a', 'b']]);
    expect(batches[1]!.closedAt - batches[0]!.closedAt).toBeGreaterThanOrEqual(150);
  });

  it('tells every request of a batch that failed before signing, and goes on with the next', async () => {
    const { batches, add } = batcherOf();
    const first = [add('a'), add('b')];
    await sleep(5);
    batches[0]!.fail(new Error('blob fee too high'));
    await expect(Promise.allSettled(first)).resolves.toEqual([
      { status: 'rejected', reason: new Error('blob fee too high') },
      { status: 'rejected', reason: new Error('blob fee too high') },
    ]);
    const next = add('c');
    await sleep(5);
    batches[1]!.sign();
    await expect(next).resolves.toBe('signed c');
  });

  it('refuses a request larger than a whole blob', async () => {
    const { add } = batcherOf({}, 100);
    await expect(add('huge', 101)).rejects.toThrow(RangeError);
  });
});
