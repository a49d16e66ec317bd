import { describe, expect, it } from '@jest/globals';
import { waitFor, waitUntil } from '../src/index.js';

describe('waitFor', () => {
  it('resolves with the first defined value of a sync or async probe', async () => {
    let calls = 0;
    expect(
      await waitFor(() => (++calls >= 3 ? calls : undefined), { what: 'three calls', intervalMs: 1 }),
    ).toBe(3);
    expect(await waitFor(async () => 'ready', { what: 'an async answer' })).toBe('ready');
  });

  it('takes false, 0 and null as answers: only undefined means not yet', async () => {
    expect(await waitFor(() => false, { what: 'false' })).toBe(false);
    expect(await waitFor(() => 0, { what: 'zero' })).toBe(0);
    expect(await waitFor(() => null, { what: 'null' })).toBeNull();
  });

  it('fails with what it waited for once the time is up', async () => {
    let calls = 0;
    const started = Date.now();
    await expect(
      waitFor(
        () => {
          calls += 1;
          return undefined;
        },
        { what: 'nothing', timeoutMs: 100, intervalMs: 10 },
      ),
    ).rejects.toThrow('timed out waiting for nothing');
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
    expect(calls).toBeGreaterThan(1);
  });

  it('fails at once with the error of a probe that throws', async () => {
    await expect(
      waitFor(
        () => {
          throw new Error('probe broke');
        },
        { what: 'a broken probe' },
      ),
    ).rejects.toThrow('probe broke');
  });
});

describe('waitUntil', () => {
  it('resolves with the first reading the test accepts, undefined included', async () => {
    let count = 0;
    expect(
      await waitUntil(
        async () => ++count,
        (value) => value === 4,
        { what: 'four', intervalMs: 1 },
      ),
    ).toBe(4);
    expect(
      await waitUntil(
        () => undefined,
        (value) => value === undefined,
        { what: 'undefined' },
      ),
    ).toBeUndefined();
  });

  it('fails with what it waited for', async () => {
    await expect(
      waitUntil(
        () => 1,
        (value) => value === 2,
        { what: 'two', timeoutMs: 50 },
      ),
    ).rejects.toThrow('timed out waiting for two');
  });
});
