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
import { LifecycleRelay } from '../../src/events/lifecycle-relay.js';

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
    stopTimeoutMs: 1_000,
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
    stopping.push(() => relay.stop());

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
    const bus = new EmbeddedEventBus({ publishTimeoutMs: 30 });
    const { store, relay, publisher } = outbox({ bus });
    const seen = await consume(bus);
    relay.start();
    stopping.push(() => relay.stop());
    bus.simulateBrokerOutage(true);

    const started = Date.now();
    await publisher.requested(call('r1'));
    await publisher.publish(call('r1'), JobLifecycleKind.SUBMITTED);
    await publisher.publish(call('r1'), JobLifecycleKind.ANSWERED);
    expect(Date.now() - started).toBeLessThan(30);
    // Several passes time out meanwhile; the events stay.
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
    stopping.push(() => relay.stop());

    await waitFor(() => seen.length === 2 || undefined, { what: 'the events after two failed passes' });
    expect(kinds(seen, 'r1')).toEqual(['REQUESTED', 'FAILED']);
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
    await store.locks.release('lifecycle-outbox:relay', 'dies');

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
    await a.relay.stop();
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
    await relay.stop();
    await waitFor(() => seen.length === 7 || undefined, { what: 'seven events' });
    expect(await store.queues.length(LIFECYCLE_OUTBOX)).toBe(0);
  });
});
