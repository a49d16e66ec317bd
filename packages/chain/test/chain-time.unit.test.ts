import { describe, expect, it } from '@jest/globals';
import { SharedChainTime } from '../src/index.js';

/** A provider whose latest block is `timestamp`, counting its reads; `failNext` makes the next read fail. */
function fakeProvider(timestamp: number) {
  const provider = {
    reads: 0,
    timestamp,
    failNext: false,
    async getBlock(tag: string) {
      expect(tag).toBe('latest');
      provider.reads += 1;
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (provider.failNext) {
        provider.failNext = false;
        throw new Error('node unreachable');
      }
      return { timestamp: provider.timestamp };
    },
  };
  return provider;
}

const inAnHour = () => Math.floor(Date.now() / 1000) + 3_600;

describe('SharedChainTime', () => {
  it('reads the latest block once for every caller within maxAgeMs, then again', async () => {
    const provider = fakeProvider(inAnHour());
    const time = new SharedChainTime(provider, 200);
    const answers = await Promise.all(Array.from({ length: 20 }, () => time.now()));
    expect(new Set(answers)).toEqual(new Set([provider.timestamp]));
    expect(await time.now()).toBe(provider.timestamp);
    expect(provider.reads).toBe(1);

    provider.timestamp += 60; // the chain's clock moved ahead (a test's ChainClock)
    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(await time.now()).toBe(provider.timestamp);
    expect(provider.reads).toBe(2);
  });

  it('takes the wall clock when the latest block is older, as chainTimeNow does', async () => {
    const provider = fakeProvider(1_000);
    const time = new SharedChainTime(provider, 1_000);
    const before = Math.floor(Date.now() / 1000);
    const now = await time.now();
    expect(now).toBeGreaterThanOrEqual(before);
    expect(now).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
  });

  it('shares no failed read: the callers of that read fail, the next one reads again', async () => {
    const provider = fakeProvider(inAnHour());
    provider.failNext = true;
    const time = new SharedChainTime(provider, 60_000);
    const first = await Promise.allSettled([time.now(), time.now()]);
    expect(first.map((outcome) => outcome.status)).toEqual(['rejected', 'rejected']);
    expect(await time.now()).toBe(provider.timestamp);
    expect(provider.reads).toBe(2);
  });
});
