import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { create } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  EmbeddedEventBus,
  EventBusClosedError,
  keyEventsTopic,
  MemoryStore,
  type EventBus,
  type EventSubscription,
} from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS } from '@svc/platform/testing';
import { KeyEventKind, KeyEventSchema } from '@svc/proto/gen/svc/events/v1/key_event_pb';
import { eventBusReadiness } from '@svc/runtime';
import { waitFor } from '@svc/testkit';
import { loadGatewayConfig } from '../../src/config.js';
import type { KeyServiceClient } from '../../src/key-service-client.js';
import { buildGatewayApp, buildLimitHitReporter } from '../../src/service.js';
import { evictOnKeyEvents } from '../../src/v1/key-event-eviction.js';
import { KeyResolutionCache, type ResolvedApiKey } from '../../src/v1/key-resolution-cache.js';
import { silentLogger } from '../support/key-service.js';

// The gateway's key-event consumer under at-least-once delivery (the same event twice, events out of
// order), the key cache while events are not heard, and what /readyz makes of a dead consumer, a broker
// outage and a key-service outage.

const keyA: ResolvedApiKey = { keyId: 'id-a', prefix: 'svc_aaaaaaa', wallet: '0xabc', spendCapWei: null };

function countingCache() {
  const lookups: string[] = [];
  const cache = new KeyResolutionCache(
    async (presented) => {
      lookups.push(presented);
      return presented === 'svc_a' ? keyA : undefined;
    },
    { maxEntries: 10, ttlMs: 60_000 },
  );
  return { cache, lookups };
}

const keyEvent = (eventId: string, kind: KeyEventKind) =>
  create(KeyEventSchema, { eventId, keyId: keyA.keyId, kind, wallet: { hex: '0xabc' } });

/** A property of the bus for a Proxy to hand out: methods bound to the bus itself (its fields are private). */
function passThrough(target: EventBus, property: string | symbol): unknown {
  const value: unknown = Reflect.get(target, property, target);
  return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
}

/** A bus that hands out the subscriptions made through it, so a test can crash one. */
function capturing(bus: EventBus): { bus: EventBus; subscriptions: EventSubscription[] } {
  const subscriptions: EventSubscription[] = [];
  const wrapped = new Proxy(bus, {
    get(target, property) {
      if (property !== 'subscribe') return passThrough(target, property);
      return async (...args: Parameters<EventBus['subscribe']>) => {
        const subscription = await target.subscribe(...args);
        subscriptions.push(subscription);
        return subscription;
      };
    },
  });
  return { bus: wrapped, subscriptions };
}

let bus: EmbeddedEventBus | undefined;
let server: Server | undefined;

afterEach(async () => {
  server?.closeAllConnections();
  await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  server = undefined;
  await bus?.close();
  bus = undefined;
});

describe('key-event eviction under redelivery', () => {
  it('handles the same event delivered twice, and events out of order, as once', async () => {
    bus = new EmbeddedEventBus();
    await bus.ensureTopics([keyEventsTopic]);
    const delivered: string[] = [];
    await bus.subscribe(keyEventsTopic, {
      group: 'observer',
      handler: async (event) => void delivered.push(event.eventId),
    });
    const { cache, lookups } = countingCache();
    await evictOnKeyEvents({ bus, topic: keyEventsTopic, groupPrefix: 'test' }, cache, silentLogger);
    await cache.resolve('svc_a');

    // A cap change, then its redelivery (a relay pass that died before marking it published), then
    // a revocation and a stale duplicate of the cap change behind it.
    const capChanged = keyEvent('cap-1', KeyEventKind.CAP_CHANGED);
    const revoked = keyEvent('revoke-1', KeyEventKind.REVOKED);
    for (const message of [capChanged, capChanged, revoked, capChanged])
      await bus.publish(keyEventsTopic, message);
    await waitFor(() => delivered.length === 4 || undefined, { what: 'four deliveries' });
    await waitFor(() => cache.cached('svc_a') === undefined || undefined, { what: 'the eviction' });
    expect(delivered).toEqual(['cap-1', 'cap-1', 'revoke-1', 'cap-1']);

    // Nothing worse than a fresh lookup follows: the key resolves at the source once more, then is cached.
    await cache.resolve('svc_a');
    await cache.resolve('svc_a');
    expect(lookups).toEqual(['svc_a', 'svc_a']);
    expect(cache.cached('svc_a')).toEqual(keyA);
  });

  it('subscribes again with a backoff while subscribing fails, and gives up only when the bus closes', async () => {
    bus = new EmbeddedEventBus();
    const real = bus;
    let refusals = 2;
    const flaky = new Proxy(real, {
      get(target, property) {
        if (property !== 'subscribe') return passThrough(target, property);
        return (...args: Parameters<EventBus['subscribe']>) =>
          refusals-- > 0 ? Promise.reject(new Error('connect ECONNREFUSED')) : target.subscribe(...args);
      },
    });
    const { cache } = countingCache();
    const fast = { initialDelayMs: 5, maxDelayMs: 10, multiplier: 2, jitter: 0 };

    const subscription = await evictOnKeyEvents(
      { bus: flaky, topic: keyEventsTopic, groupPrefix: 'test' },
      cache,
      silentLogger,
      fast,
    );
    expect(subscription.health()).toMatchObject({ live: true, group: expect.stringMatching(/^test-/) });
    expect(refusals).toBe(-1);

    await real.close();
    await expect(
      evictOnKeyEvents({ bus: real, topic: keyEventsTopic, groupPrefix: 'test' }, cache, silentLogger, fast),
    ).rejects.toBeInstanceOf(EventBusClosedError);
  });
});

describe('the key cache while key events are not heard', () => {
  it('is off (every call asks the key-service) while the feed is down, and on again once it is live', async () => {
    let heard = true;
    const lookups: string[] = [];
    const cache = new KeyResolutionCache(
      async (presented) => {
        lookups.push(presented);
        return keyA;
      },
      { maxEntries: 10, ttlMs: 60_000, evictionsHeard: () => heard },
    );
    await cache.resolve('svc_a');
    expect(cache.cached('svc_a')).toEqual(keyA);

    heard = false;
    expect(cache.cached('svc_a')).toBeUndefined();
    await cache.resolve('svc_a');
    await cache.resolve('svc_a');
    expect(lookups).toHaveLength(3);

    // What was cached before the gap is gone for good, not back once the feed is.
    heard = true;
    expect(cache.cached('svc_a')).toBeUndefined();
    await cache.resolve('svc_a');
    await cache.resolve('svc_a');
    expect(lookups).toHaveLength(4);
  });

  it('does not cache a lookup that was running when the feed went down', async () => {
    let heard = true;
    let answer: (key: ResolvedApiKey) => void = () => undefined;
    const cache = new KeyResolutionCache(() => new Promise((resolve) => (answer = resolve)), {
      maxEntries: 10,
      ttlMs: 60_000,
      evictionsHeard: () => heard,
    });
    const pending = cache.resolve('svc_a');
    heard = false;
    cache.cached('svc_a');
    heard = true;
    answer(keyA);
    await pending;
    expect(cache.cached('svc_a')).toBeUndefined();
  });
});

describe('/readyz and a dead event consumer', () => {
  async function gatewayOn(shared: EmbeddedEventBus, keyService = healthyKeyService()) {
    const config = loadGatewayConfig({
      KEY_SERVICE_ADDRESS: '127.0.0.1:1',
      TRUST_PROXY: 'loopback',
      ...TEST_SERVICE_TOKEN_SETTINGS,
    });
    const store = new MemoryStore();
    const { bus: wrapped, subscriptions } = capturing(shared);
    const app = buildGatewayApp({
      config,
      keyService,
      store,
      logger: silentLogger,
      limitHits: buildLimitHitReporter({ config, keyService, store, logger: silentLogger }),
      keyEvents: { bus: wrapped, topic: keyEventsTopic },
      // As the runner gives it (module.ts): one readiness for the process, from the bus's health.
      notReadyBecause: () => eventBusReadiness(shared).notReadyBecause(),
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise<void>((resolve) => server!.once('listening', resolve));
    const { port } = server.address() as AddressInfo;
    const readyz = async () => {
      const response = await fetch(`http://127.0.0.1:${port}/readyz`);
      return { status: response.status, body: (await response.json()) as unknown };
    };
    return { readyz, subscriptions };
  }

  /** Only /readyz is called: the key-service answers its JWKS while `state.up`. */
  function healthyKeyService() {
    const state = { up: true };
    const client = {
      getJwks: async () => {
        if (!state.up) throw new Error('14 UNAVAILABLE: no connection established');
        return { keys: [] };
      },
    } as unknown as KeyServiceClient;
    return Object.assign(client, { state });
  }

  it('stays ready through a broker outage (the consumer is reconnecting on every replica alike)', async () => {
    bus = new EmbeddedEventBus();
    const { readyz, subscriptions } = await gatewayOn(bus);
    await waitFor(() => subscriptions.length === 1 || undefined, { what: 'the eviction subscription' });

    bus.simulateBrokerOutage(true);
    expect(subscriptions[0]!.health().state).toBe('reconnecting');
    expect(await readyz()).toEqual({ status: 200, body: { status: 'ready' } });
    bus.simulateBrokerOutage(false);
  });

  it('is ready before the key-event subscription is made (the cache is off meanwhile)', async () => {
    bus = new EmbeddedEventBus();
    const never = new Proxy(bus, {
      get: (target, property) =>
        property === 'subscribe' ? () => new Promise(() => undefined) : passThrough(target, property),
    });
    const { readyz } = await gatewayOn(never as EmbeddedEventBus);
    expect(await readyz()).toEqual({ status: 200, body: { status: 'ready' } });
  });

  it('waits for the key-service to answer once, then stays ready through a key-service outage', async () => {
    bus = new EmbeddedEventBus();
    const keyService = healthyKeyService();
    keyService.state.up = false;
    const { readyz } = await gatewayOn(bus, keyService);
    // Never reached: a wrong address or secret, which must keep a new replica out (and stop a rollout).
    expect(await readyz()).toEqual({ status: 503, body: { status: 'not_ready' } });

    keyService.state.up = true;
    expect(await readyz()).toEqual({ status: 200, body: { status: 'ready' } });
    // An outage after that is every replica's: leaving rotation cannot fix it, and x402 calls and the
    // console need no key-service.
    keyService.state.up = false;
    expect(await readyz()).toEqual({ status: 200, body: { status: 'ready' } });
  });

  it('answers 503 while the key-event consumer is down, 200 once it recovered', async () => {
    bus = new EmbeddedEventBus();
    const { readyz, subscriptions } = await gatewayOn(bus);
    await waitFor(() => subscriptions.length === 1 || undefined, { what: 'the eviction subscription' });
    expect(await readyz()).toEqual({ status: 200, body: { status: 'ready' } });

    await bus.simulateConsumerCrash(subscriptions[0]!, 'the group could not be rejoined');
    expect(await readyz()).toEqual({ status: 503, body: { status: 'not_ready' } });

    bus.simulateConsumerRecovery(subscriptions[0]!);
    expect(await readyz()).toEqual({ status: 200, body: { status: 'ready' } });
  });
});
