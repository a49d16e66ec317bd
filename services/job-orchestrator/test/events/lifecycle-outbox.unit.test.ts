import { fromBinary } from '@bufbuild/protobuf';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  AppError,
  createLogger,
  EmbeddedEventBus,
  jobLifecycleTopic,
  MemoryStore,
  PublishTimeoutError,
  StoreUnavailableError,
  type EventBus,
  type Store,
} from '@svc/platform';
import {
  JobLifecycleEventSchema,
  JobLifecycleKind,
  type JobLifecycleEvent,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { waitFor } from '@svc/testkit';
import {
  LIFECYCLE_OUTBOX,
  LifecyclePublisher,
  type CallIdentity,
} from '../../src/events/lifecycle-events.js';
import {
  LifecycleRelay,
  lifecycleOutboxEvents,
  lifecycleOutboxOldestAgeSeconds,
  RELAY_LOCK,
  type LifecycleRelaySettings,
} from '../../src/events/lifecycle-relay.js';
import { JobOrchestratorMetrics } from '../../src/observability/job-orchestrator-metrics.js';

// The lifecycle outbox: calls record events in the shared store and never wait on the bus; the relay
// hands them on in order, through a broker outage, failing sends, a replica that dies mid-pass, and stop.

const logger = createLogger({ service: 'lifecycle-outbox-test', level: 'silent' });
const fast = { initialDelayMs: 5, maxDelayMs: 20, multiplier: 2, jitter: 0 };

const call = (reservationId: string): CallIdentity => ({
  reservationId,
  requestId: `req-${reservationId}`,
  paymentPath: 'delegate',
  payer: '0x00000000000000000000000000000000000000aa',
  keyId: 'key-1',
  model: 'model-a',
});

const relaySettings: LifecycleRelaySettings = {
  replicaId: 'replica-1',
  batchSize: 3,
  pollIntervalMs: 20,
  retry: fast,
};

const stopping: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const stop of stopping.splice(0).reverse()) await stop();
});

function outbox(options: { store?: Store; bus?: EventBus; maxEvents?: number; replicaId?: string } = {}) {
  const store = options.store ?? new MemoryStore();
  const bus = options.bus ?? new EmbeddedEventBus({ publishTimeoutMs: 50 });
  const relay = new LifecycleRelay(store, bus, logger, {
    replicaId: options.replicaId ?? 'replica-1',
    batchSize: 3,
    pollIntervalMs: 20,
    retry: fast,
  });
  const publisher = new LifecyclePublisher(store, logger, {
    maxEvents: options.maxEvents ?? 100,
    onQueued: () => relay.wake(),
    retry: fast,
  });
  return { store, bus, relay, publisher };
}

async function consume(bus: EventBus): Promise<JobLifecycleEvent[]> {
  const seen: JobLifecycleEvent[] = [];
  stopping.push(() => bus.close());
  await bus.subscribe(jobLifecycleTopic, {
    group: 'observer',
    handler: async (e) => void seen.push(e.message),
  });
  return seen;
}

const kinds = (events: readonly JobLifecycleEvent[], reservationId: string) =>
  events
    .filter((event) => event.reservationId === reservationId)
    .map((event) => JobLifecycleKind[event.kind]);

describe('the job lifecycle outbox', () => {
  it('hands every event to the bus, in order per reservation, and empties the outbox', async () => {
    const { store, bus, relay, publisher } = outbox();
    const seen = await consume(bus);
    relay.start();
    stopping.push(() => relay.stop(1_000));

    await publisher.requested(call('r1'));
    await publisher.requested(call('r2'));
    // Published without waiting, as the session callbacks do: order still holds per reservation.
    void publisher.publish(call('r1'), JobLifecycleKind.SESSION_OPENED);
    void publisher.publish(call('r2'), JobLifecycleKind.SUBMITTED);
    void publisher.publish(call('r1'), JobLifecycleKind.SESSION_CLAIMED);
    await publisher.publish(call('r1'), JobLifecycleKind.SUBMITTED);
    await publisher.publish(call('r1'), JobLifecycleKind.ANSWERED, { feeWei: 5n });

    await waitFor(() => seen.length === 7 || undefined, { what: 'seven events' });
    expect(kinds(seen, 'r1')).toEqual([
      'REQUESTED',
      'SESSION_OPENED',
      'SESSION_CLAIMED',
      'SUBMITTED',
      'ANSWERED',
    ]);
    expect(kinds(seen, 'r2')).toEqual(['REQUESTED', 'SUBMITTED']);
    expect(seen.find((event) => event.kind === JobLifecycleKind.ANSWERED)?.feeWei?.decimal).toBe('5');
    await waitFor(async () => (await store.queues.length(LIFECYCLE_OUTBOX)) === 0 || undefined, {
      what: 'an empty outbox',
    });
  });

  it('never makes a call wait on a broker outage, and delivers what it kept once the brokers are back', async () => {
    // A publish timeout far above what recording takes, even on a loaded machine.
    const bus = new EmbeddedEventBus({ publishTimeoutMs: 5_000 });
    const { store, relay, publisher } = outbox({ bus });
    const seen = await consume(bus);
    relay.start();
    stopping.push(() => relay.stop(1_000));
    bus.simulateBrokerOutage(true);

    const started = Date.now();
    await publisher.requested(call('r1'));
    await publisher.publish(call('r1'), JobLifecycleKind.SUBMITTED);
    await publisher.publish(call('r1'), JobLifecycleKind.ANSWERED);
    expect(Date.now() - started).toBeLessThan(1_000);
    // The relay's pass waits for the brokers meanwhile; the events stay.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(await store.queues.length(LIFECYCLE_OUTBOX)).toBe(3);
    expect(seen).toEqual([]);

    bus.simulateBrokerOutage(false);
    await waitFor(() => seen.length === 3 || undefined, { what: 'the kept events' });
    expect(kinds(seen, 'r1')).toEqual(['REQUESTED', 'SUBMITTED', 'ANSWERED']);
  });

  it('retries a batch whose publish failed with the same event ids, never losing or reordering one', async () => {
    const real = new EmbeddedEventBus();
    let failures = 2;
    const flaky = new Proxy(real, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property, target);
        if (property === 'publishBatch')
          return (...args: Parameters<EventBus['publishBatch']>) =>
            failures-- > 0
              ? Promise.reject(new PublishTimeoutError(jobLifecycleTopic.name, 50, args[1].length))
              : target.publishBatch(...args);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const { relay, publisher } = outbox({ bus: flaky });
    const seen = await consume(real);
    await publisher.requested(call('r1'));
    await publisher.publish(call('r1'), JobLifecycleKind.FAILED);
    relay.start();
    stopping.push(() => relay.stop(1_000));

    await waitFor(() => seen.length === 2 || undefined, { what: 'the events after two failed passes' });
    expect(kinds(seen, 'r1')).toEqual(['REQUESTED', 'FAILED']);
  });

  it('creates the topic before its first publish, not at start, trying again while the brokers cannot', async () => {
    const real = new EmbeddedEventBus();
    let unreachable = 2;
    const created: string[][] = [];
    const lateBrokers = new Proxy(real, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property, target);
        if (property === 'ensureTopics')
          return (topics: Parameters<EventBus['ensureTopics']>[0]) => {
            if (unreachable-- > 0) return Promise.reject(new Error('connect ECONNREFUSED'));
            created.push(topics.map((topic) => topic.name));
            return target.ensureTopics(topics);
          };
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const { relay, publisher } = outbox({ bus: lateBrokers });
    const seen = await consume(real);
    relay.start();
    stopping.push(() => relay.stop(1_000));
    // Nothing to publish yet: nothing asked of the brokers.
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(unreachable).toBe(2);

    await publisher.requested(call('r1'));
    await waitFor(() => seen.length === 1 || undefined, { what: 'the event once the topic exists' });
    expect(created).toEqual([[jobLifecycleTopic.name]]);
    await publisher.publish(call('r1'), JobLifecycleKind.FAILED);
    await waitFor(() => seen.length === 2 || undefined, { what: 'the next event' });
    expect(created).toHaveLength(1);
  });

  it('publishes again, with the same ids, what a replica published before dying, from another replica', async () => {
    const store = new MemoryStore();
    const bus = new EmbeddedEventBus();
    const seen = await consume(bus);
    const first = outbox({ store, bus, replicaId: 'dies' });
    await first.publisher.requested(call('r1'));
    await first.publisher.publish(call('r1'), JobLifecycleKind.ANSWERED);
    // The pass publishes, then the replica dies before removing the batch (and before its lock lapses).
    const remove = store.queues.remove.bind(store.queues);
    store.queues.remove = () => Promise.reject(new StoreUnavailableError('queues.remove', new Error('gone')));
    await expect(first.relay.pass()).rejects.toBeInstanceOf(StoreUnavailableError);
    store.queues.remove = remove;
    await store.locks.release(RELAY_LOCK, 'dies');

    const second = outbox({ store, bus, replicaId: 'survivor' });
    expect(await second.relay.pass()).toBe(2);
    await waitFor(() => seen.length === 4 || undefined, { what: 'the events and their repeats' });
    expect(kinds(seen, 'r1')).toEqual(['REQUESTED', 'ANSWERED', 'REQUESTED', 'ANSWERED']);
    expect(seen[2]!.eventId).toBe(seen[0]!.eventId);
    expect(await store.queues.length(LIFECYCLE_OUTBOX)).toBe(0);
  });

  it('lets one replica relay at a time', async () => {
    const store = new MemoryStore();
    const bus = new EmbeddedEventBus();
    const a = outbox({ store, bus, replicaId: 'a' });
    const b = outbox({ store, bus, replicaId: 'b' });
    await a.publisher.requested(call('r1'));
    expect(await a.relay.pass()).toBe(1);
    await b.publisher.requested(call('r2'));
    expect(await b.relay.pass()).toBe(0);
    expect(await a.relay.pass()).toBe(1);
    await a.relay.stop(1_000);
    await b.publisher.requested(call('r3'));
    expect(await b.relay.pass()).toBe(1);
    await bus.close();
  });

  it('refuses a new call loudly while the outbox is full, but keeps every event of calls under way', async () => {
    const { store, publisher } = outbox({ maxEvents: 2 });
    await publisher.requested(call('r1'));
    await publisher.requested(call('r2'));
    await expect(publisher.requested(call('r3'))).rejects.toEqual(expect.any(AppError));
    await expect(publisher.requested(call('r3'))).rejects.toMatchObject({ code: 'job_failed' });
    await publisher.publish(call('r1'), JobLifecycleKind.ANSWERED);
    expect(await store.queues.length(LIFECYCLE_OUTBOX)).toBe(3);
  });

  it('retries an event while the store fails, keeping the events of its call behind it', async () => {
    const store = new MemoryStore();
    const push = store.queues.push.bind(store.queues);
    let failures = 3;
    store.queues.push = (...args) =>
      failures-- > 0
        ? Promise.reject(new StoreUnavailableError('queues.push', new Error('down')))
        : push(...args);
    const { publisher } = outbox({ store });
    const answered = publisher.publish(call('r1'), JobLifecycleKind.ANSWERED);
    const released = publisher.publish(call('r1'), JobLifecycleKind.RELEASED);
    await Promise.all([answered, released]);
    const entries = await store.queues.peek(LIFECYCLE_OUTBOX, 10);
    expect(
      entries.map((entry) => JobLifecycleKind[fromBinary(JobLifecycleEventSchema, entry.payload).kind]),
    ).toEqual(['ANSWERED', 'RELEASED']);
  });

  it('publishes what is left when it stops', async () => {
    const { store, bus, relay, publisher } = outbox();
    const seen = await consume(bus);
    for (let i = 0; i < 7; i++) await publisher.publish(call(`r${i}`), JobLifecycleKind.FAILED);
    // Never started: stop's own drain sends everything, in batches.
    await relay.stop(1_000);
    await waitFor(() => seen.length === 7 || undefined, { what: 'seven events' });
    expect(await store.queues.length(LIFECYCLE_OUTBOX)).toBe(0);
  });

  it('frees the turn after a failed pass, so a sick replica does not keep the others from relaying', async () => {
    const store = new MemoryStore();
    const real = new EmbeddedEventBus();
    const sickBus = new Proxy(real, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property, target);
        if (property === 'publishBatch')
          return () => Promise.reject(new PublishTimeoutError(jobLifecycleTopic.name, 50, 1));
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const sick = outbox({ store, bus: sickBus, replicaId: 'sick' });
    const healthy = outbox({ store, bus: real, replicaId: 'healthy' });
    const seen = await consume(real);
    await sick.publisher.requested(call('r1'));
    await expect(sick.relay.pass()).rejects.toBeInstanceOf(PublishTimeoutError);
    expect(await store.locks.holder(RELAY_LOCK)).toBeNull();
    expect(await healthy.relay.pass()).toBe(1);
    await waitFor(() => seen.length === 1 || undefined, { what: 'the event, from the healthy replica' });
  });

  it('cuts a pass off at a third of the lock TTL, freeing the turn and keeping the batch', async () => {
    const store = new MemoryStore();
    const real = new EmbeddedEventBus();
    stopping.push(() => real.close());
    const hanging = new Proxy(real, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property, target);
        if (property === 'publishBatch') return () => new Promise(() => undefined);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const relay = new LifecycleRelay(store, hanging, logger, {
      replicaId: 'r',
      batchSize: 3,
      pollIntervalMs: 20,
      lockTtlMs: 300,
    });
    const { publisher } = outbox({ store });
    await publisher.requested(call('r1'));
    const started = Date.now();
    await expect(relay.pass()).rejects.toThrow(/longer than 100 ms/);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(await store.locks.holder(RELAY_LOCK)).toBeNull();
    expect(await store.queues.length(LIFECYCLE_OUTBOX)).toBe(1);
    expect(() => new LifecycleRelay(store, real, logger, { ...relaySettings, lockTtlMs: 0 })).toThrow(
      RangeError,
    );
  });

  it('stops at once when stop() comes during a pass that then fails, never sleeping through the backoff', async () => {
    const store = new MemoryStore();
    const real = new EmbeddedEventBus();
    let failNext: ((error: Error) => void) | undefined;
    const gated = new Proxy(real, {
      get(target, property) {
        const value: unknown = Reflect.get(target, property, target);
        if (property === 'publishBatch')
          return (...args: Parameters<EventBus['publishBatch']>) =>
            failNext === undefined && args.length > 0
              ? new Promise((_resolve, reject) => (failNext = reject))
              : target.publishBatch(...args);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const seen = await consume(real);
    const relay = new LifecycleRelay(store, gated, logger, {
      ...relaySettings,
      retry: { initialDelayMs: 10_000, maxDelayMs: 10_000, multiplier: 1, jitter: 0 },
    });
    const { publisher } = outbox({ store });
    await publisher.requested(call('r1'));
    relay.start();
    await waitFor(() => failNext, { what: 'a pass publishing' });
    const started = Date.now();
    const stopped = relay.stop(5_000);
    failNext!(new PublishTimeoutError(jobLifecycleTopic.name, 50, 1));
    await stopped;
    // Not the 10 s backoff, nor the 5 s stop timeout: the loop ended, then stop's own pass published.
    expect(Date.now() - started).toBeLessThan(1_000);
    await waitFor(() => seen.length === 1 || undefined, { what: "stop's pass" });
  });

  it('keeps its stop within its timeout while the bus hangs', async () => {
    const store = new MemoryStore();
    const real = new EmbeddedEventBus({ publishTimeoutMs: 60_000 });
    stopping.push(() => real.close());
    real.simulateBrokerOutage(true);
    const { relay, publisher } = outbox({ store, bus: real });
    await publisher.requested(call('r1'));
    relay.start();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const started = Date.now();
    await relay.stop(200);
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(await store.queues.length(LIFECYCLE_OUTBOX)).toBe(1);
    real.simulateBrokerOutage(false);
  });

  it('logs an entry that is not an event at error level, in full, and removes it without holding up the rest', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logged = createLogger({
      service: 'lifecycle-outbox-test',
      level: 'debug',
      destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    });
    const store = new MemoryStore();
    const bus = new EmbeddedEventBus();
    const seen = await consume(bus);
    const relay = new LifecycleRelay(store, bus, logged, relaySettings);
    const { publisher } = outbox({ store, bus });
    await publisher.requested(call('r1'));
    await store.queues.push(LIFECYCLE_OUTBOX, Uint8Array.from([0xff, 0xff, 0xff]));
    await store.queues.push(LIFECYCLE_OUTBOX, new Uint8Array(0));
    await publisher.publish(call('r1'), JobLifecycleKind.ANSWERED);

    expect(await relay.pass()).toBe(3);
    expect(await relay.pass()).toBe(1);
    await waitFor(() => seen.length === 2 || undefined, { what: 'the good events' });
    expect(kinds(seen, 'r1')).toEqual(['REQUESTED', 'ANSWERED']);
    expect(await store.queues.length(LIFECYCLE_OUTBOX)).toBe(0);
    const bad = lines.filter((line) => line.level === 'error');
    expect(bad.map((line) => line.payload)).toEqual(['////', '']);
    expect(bad[0]!.msg).toMatch(/not a job lifecycle event: removing it/);
  });

  it('does not go to the store on every wake while another replica holds the turn', async () => {
    const store = new MemoryStore();
    const bus = new EmbeddedEventBus();
    stopping.push(() => bus.close());
    await store.locks.tryAcquire(RELAY_LOCK, 'leader', 60_000);
    let tries = 0;
    const tryAcquire = store.locks.tryAcquire.bind(store.locks);
    store.locks.tryAcquire = (...args) => {
      tries += 1;
      return tryAcquire(...args);
    };
    const follower = new LifecycleRelay(store, bus, logger, {
      ...relaySettings,
      replicaId: 'follower',
      pollIntervalMs: 1_000,
    });
    follower.start();
    stopping.push(() => follower.stop(1_000));
    await waitFor(() => tries > 0 || undefined, { what: 'a first try for the turn' });
    for (let i = 0; i < 20; i++) {
      follower.wake();
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(tries).toBe(1);
  });

  it('refuses a new call as job_failed, not submitted, when the store fails', async () => {
    const store = new MemoryStore();
    store.queues.push = () => Promise.reject(new StoreUnavailableError('queues.push', new Error('down')));
    const { publisher } = outbox({ store });
    await expect(publisher.requested(call('r1'))).rejects.toMatchObject({
      code: 'job_failed',
      message: expect.stringMatching(/cannot record new jobs now/) as unknown as string,
    });
  });

  it('gives up at its stop timeout on events the store never took, logging each in full', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const logged = createLogger({
      service: 'lifecycle-outbox-test',
      level: 'error',
      destination: { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    });
    const store = new MemoryStore();
    // The store does not answer at all (a connection that hangs), rather than failing fast.
    store.queues.push = () => new Promise(() => undefined);
    const publisher = new LifecyclePublisher(store, logged, { maxEvents: 10, retry: fast });
    const answered = publisher.publish(call('r1'), JobLifecycleKind.ANSWERED);
    const released = publisher.publish(call('r1'), JobLifecycleKind.RELEASED);
    const started = Date.now();
    await publisher.stop(50);
    expect(Date.now() - started).toBeLessThan(1_000);
    await Promise.all([answered, released]);
    const lost = lines.filter((line) => String(line.msg).startsWith('job lifecycle event lost'));
    expect(lost.map((line) => line.kind)).toEqual(['ANSWERED', 'RELEASED']);
    const event = fromBinary(JobLifecycleEventSchema, Buffer.from(String(lost[0]!.event), 'base64'));
    expect(event.reservationId).toBe('r1');
  });

  it('reports the outbox on the metrics: its events and the age of the oldest', async () => {
    const store = new MemoryStore();
    const metrics = new JobOrchestratorMetrics(undefined, undefined, {
      events: () => lifecycleOutboxEvents(store),
      oldestAgeSeconds: () => lifecycleOutboxOldestAgeSeconds(store),
    });
    const sample = async (name: string) =>
      (await metrics.registry.getSingleMetric(name)!.get()).values[0]?.value;
    const events = 'svc_job_orchestrator_lifecycle_outbox_events';
    const age = 'svc_job_orchestrator_lifecycle_outbox_oldest_event_age_seconds';
    expect(await sample(events)).toBe(0);
    expect(await sample(age)).toBe(0);
    const { publisher } = outbox({ store });
    await publisher.publish(call('r1'), JobLifecycleKind.FAILED, {
      occurredAt: new Date(Date.now() - 60_000),
    });
    await publisher.publish(call('r2'), JobLifecycleKind.FAILED);
    expect(await sample(events)).toBe(2);
    expect(await sample(age)).toBeGreaterThanOrEqual(60);
    expect(await sample(age)).toBeLessThan(120);
    // The store down: reset (prom-client reports an unlabelled gauge reset as 0), never the stale 2.
    store.queues.length = () => Promise.reject(new StoreUnavailableError('queues.length', new Error('down')));
    expect(await sample(events)).toBe(0);
  });
});
