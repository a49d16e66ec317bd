import { describe, expect, it } from '@jest/globals';
import { MemoryStore, type Store } from '../../src/store/index.js';
import { describeStoreContract } from './store-contract.js';

describeStoreContract('MemoryStore', async () => {
  const store = new MemoryStore();
  const scratch: Store[] = [];
  return {
    // One process shares one MemoryStore, so both "replicas" are the same instance.
    replicas: [store, store],
    openScratch: async () => {
      const own = new MemoryStore();
      scratch.push(own);
      return own;
    },
    dispose: async () => {
      await Promise.all([store, ...scratch].map((s) => s.close()));
    },
  };
});

describe('MemoryStore with an injected clock', () => {
  function storeAt(start: number) {
    const clock = { now: start };
    return { clock, store: new MemoryStore({ clock: () => clock.now }) };
  }

  it('expires values, locks and leases exactly at their TTL', async () => {
    const { clock, store } = storeAt(1_000_000);
    await store.values.set('v', 'x', 1_000);
    expect((await store.locks.tryAcquire('l', 'owner', 1_000)).acquired).toBe(true);
    expect((await store.concurrency.acquire('c', 1, 1_000)).granted).toBe(true);

    clock.now += 999;
    expect(await store.values.get('v')).toBe('x');
    expect(await store.locks.holder('l')).toBe('owner');
    expect(await store.concurrency.acquire('c', 1, 1_000)).toEqual({
      granted: false,
      active: 1,
      retryAfterMs: 1,
    });

    clock.now += 1;
    expect(await store.values.get('v')).toBeNull();
    expect(await store.locks.holder('l')).toBeNull();
    expect(await store.concurrency.count('c')).toBe(0);
    await store.close();
  });

  it('reports rate-window waits and resets against its clock', async () => {
    const { clock, store } = storeAt(5_000);
    expect(await store.rateWindows.hit('k', 2, 1_000)).toEqual({
      allowed: true,
      limit: 2,
      remaining: 1,
      retryAfterMs: 0,
      resetAtMs: 6_000,
    });
    clock.now += 400;
    await store.rateWindows.hit('k', 2, 1_000);
    clock.now += 100;
    expect(await store.rateWindows.hit('k', 2, 1_000)).toEqual({
      allowed: false,
      limit: 2,
      remaining: 0,
      retryAfterMs: 500,
      resetAtMs: 6_400,
    });
    clock.now += 500;
    expect((await store.rateWindows.hit('k', 2, 1_000)).allowed).toBe(true);
    await store.close();
  });

  it('keeps live entries through a sweep and drops lapsed ones', async () => {
    const { clock, store } = storeAt(0);
    await store.values.set('short', 'a', 100);
    await store.values.set('long', 'b', 10_000);
    await store.presence.announce('workers', 'w1', 'x', 100);
    clock.now = 200;
    store.sweep();
    expect(await store.values.get('long')).toBe('b');
    expect(await store.values.get('short')).toBeNull();
    expect(await store.presence.list('workers')).toEqual([]);
    await store.close();
  });
});
