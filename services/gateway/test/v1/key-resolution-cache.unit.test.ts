import { create } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from '@jest/globals';
import { waitFor } from '@svc/testkit';
import { EmbeddedEventBus, keyEventsTopic } from '@svc/platform';
import { KeyEventKind, KeyEventSchema } from '@svc/proto/gen/svc/events/v1/key_event_pb';
import { evictOnKeyEvents } from '../../src/v1/key-event-eviction.js';
import { KeyResolutionCache, type ResolvedApiKey } from '../../src/v1/key-resolution-cache.js';
import { silentLogger } from '../support/key-service.js';

function keyNamed(presented: string): ResolvedApiKey {
  return { keyId: `id-${presented}`, prefix: presented.slice(0, 11), wallet: '0xabc', spendCapWei: null };
}

/** A lookup that counts its calls and knows every key but `svc_unknown`. */
function countingLookup() {
  const calls: string[] = [];
  return {
    calls,
    lookup: async (presented: string) => {
      calls.push(presented);
      await new Promise((resolve) => setTimeout(resolve, 5));
      return presented === 'svc_unknown' ? undefined : keyNamed(presented);
    },
  };
}

let bus: EmbeddedEventBus | undefined;
afterEach(async () => {
  await bus?.close();
  bus = undefined;
});

describe('KeyResolutionCache', () => {
  it('answers a warm key from memory and shares one lookup among concurrent misses', async () => {
    const source = countingLookup();
    const cache = new KeyResolutionCache(source.lookup, { maxEntries: 10, ttlMs: 60_000 });
    const keys = await Promise.all(Array.from({ length: 20 }, () => cache.resolve('svc_a')));
    expect(new Set(keys.map((key) => key?.keyId))).toEqual(new Set(['id-svc_a']));
    expect(source.calls).toEqual(['svc_a']);
    expect(cache.cached('svc_a')).toEqual(keyNamed('svc_a'));
  });

  it('does not cache a key that does not work', async () => {
    const source = countingLookup();
    const cache = new KeyResolutionCache(source.lookup, { maxEntries: 10, ttlMs: 60_000 });
    expect(await cache.resolve('svc_unknown')).toBeUndefined();
    expect(await cache.resolve('svc_unknown')).toBeUndefined();
    expect(source.calls).toHaveLength(2);
  });

  it('holds at most maxEntries keys, dropping the least recently used', async () => {
    const source = countingLookup();
    const cache = new KeyResolutionCache(source.lookup, { maxEntries: 2, ttlMs: 60_000 });
    await cache.resolve('svc_a');
    await cache.resolve('svc_b');
    await cache.resolve('svc_a');
    await cache.resolve('svc_c');
    expect(cache.size).toBe(2);
    expect(cache.cached('svc_b')).toBeUndefined();
    expect(cache.cached('svc_a')).toBeDefined();
  });

  it('forgets a key after its TTL', async () => {
    const source = countingLookup();
    const cache = new KeyResolutionCache(source.lookup, { maxEntries: 10, ttlMs: 30 });
    await cache.resolve('svc_a');
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(cache.cached('svc_a')).toBeUndefined();
  });

  it('resolves every call at the source when disabled', async () => {
    const source = countingLookup();
    const cache = new KeyResolutionCache(source.lookup, { maxEntries: 0, ttlMs: 60_000 });
    await Promise.all([cache.resolve('svc_a'), cache.resolve('svc_a')]);
    await cache.resolve('svc_a');
    expect(source.calls).toHaveLength(3);
    expect(cache.cached('svc_a')).toBeUndefined();
  });

  it('does not store a lookup that an eviction overtook', async () => {
    const source = countingLookup();
    const cache = new KeyResolutionCache(source.lookup, { maxEntries: 10, ttlMs: 60_000 });
    const pending = cache.resolve('svc_a');
    cache.evict('id-svc_a');
    expect(await pending).toEqual(keyNamed('svc_a'));
    expect(cache.cached('svc_a')).toBeUndefined();
  });
});

describe('eviction on key events', () => {
  it.each([
    ['revoked', KeyEventKind.REVOKED],
    ['deleted', KeyEventKind.DELETED],
    ['cap changed', KeyEventKind.CAP_CHANGED],
  ])('evicts the key named by a %s event, and leaves other keys cached', async (_name, kind) => {
    bus = new EmbeddedEventBus();
    await bus.ensureTopics([keyEventsTopic]);
    const source = countingLookup();
    const cache = new KeyResolutionCache(source.lookup, { maxEntries: 10, ttlMs: 60_000 });
    await evictOnKeyEvents({ bus, topic: keyEventsTopic, groupPrefix: 'test' }, cache, silentLogger);
    await cache.resolve('svc_a');
    await cache.resolve('svc_b');
    await bus.publish(
      keyEventsTopic,
      create(KeyEventSchema, { eventId: `e-${kind}`, keyId: 'id-svc_a', kind, wallet: { hex: '0xabc' } }),
    );
    await waitFor(() => cache.cached('svc_a') === undefined || undefined, { what: 'the key to be evicted' });
    expect(cache.cached('svc_b')).toBeDefined();
  });

  it('gives each replica every event (one consumer group per replica)', async () => {
    bus = new EmbeddedEventBus();
    await bus.ensureTopics([keyEventsTopic]);
    const caches = [1, 2].map(
      () => new KeyResolutionCache(countingLookup().lookup, { maxEntries: 10, ttlMs: 60_000 }),
    );
    for (const cache of caches) {
      await evictOnKeyEvents({ bus, topic: keyEventsTopic, groupPrefix: 'test' }, cache, silentLogger);
      await cache.resolve('svc_a');
    }
    await bus.publish(
      keyEventsTopic,
      create(KeyEventSchema, {
        eventId: 'e1',
        keyId: 'id-svc_a',
        kind: KeyEventKind.REVOKED,
        wallet: { hex: '0xabc' },
      }),
    );
    await waitFor(() => caches.every((cache) => cache.cached('svc_a') === undefined) || undefined, {
      what: 'both replicas to evict the key',
    });
  });
});
