import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { create } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  dedupeByEventId,
  EmbeddedEventBus,
  InMemoryProcessedEventIds,
  jobLifecycleTopic,
  keyEventsTopic,
  PublishTimeoutError,
  type EventBus,
  type EventHandler,
  type EventSubscription,
  type ReceivedEvent,
} from '@svc/platform';
import {
  JobLifecycleEventSchema,
  JobLifecycleKind,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { KeyEventKind, type KeyEvent } from '@svc/proto/gen/svc/events/v1/key_event_pb';
import { createTestDatabase, waitFor, type TestDatabase } from '@svc/testkit';
import { inTransaction, openDatabase, type PrismaClient } from '../src/db/database.js';
import { recordKeyChange } from '../src/events/key-event-outbox.js';
import { OutboxRelay } from '../src/events/outbox-relay.js';
import { applyMigrations } from '../src/db/migrate.js';
import { generateSigningKey, TokenKeyRing } from '../src/signin/token-key-ring.js';
import { parseWalletAddress } from '../src/wallet/wallet-address.js';
import { silentLogger, startReplica, type KeyServiceReplica } from './support/key-service-harness.js';
import { randomWallet } from './support/sign-in.js';
import { createTestStore, type TestStore } from './support/test-store.js';

// Delivery is at least once: every consumer of the key-service must tolerate an event twice, and out of
// order where two producers publish for one key. And the outbox relay must stay correct when two
// replicas relay at once, when a pass dies between publishing and marking, and when publishing times out.

let database: TestDatabase;
let redis: TestStore;
let bus: EmbeddedEventBus;
let tokenKeys: TokenKeyRing;
const replicas: KeyServiceReplica[] = [];

beforeAll(async () => {
  database = await createTestDatabase({ prefix: 'ks', migrate: (url) => applyMigrations(url) });
  redis = createTestStore();
  bus = new EmbeddedEventBus({ handlerRetry: { initialDelayMs: 10, maxDelayMs: 50 } });
  const signing = await generateSigningKey();
  tokenKeys = new TokenKeyRing(signing.key, [signing.verification]);
});

afterAll(async () => {
  await Promise.all(replicas.map((replica) => replica.close()));
  await bus?.close();
  await redis?.cleanup();
  await database?.drop();
});

/** A property of the bus for a Proxy to hand out: methods bound to the bus itself (its fields are private). */
function passThrough(target: EventBus, property: string | symbol): unknown {
  const value: unknown = Reflect.get(target, property, target);
  return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
}

/**
 * The bus as one replica sees it: subscriptions made through it are kept, and each handler is wrapped
 * so the test knows what it handled (and may hold it after the effect, before the acknowledgement).
 */
function observedBus(shared: EventBus) {
  const handled: string[] = [];
  const subscriptions: EventSubscription[] = [];
  let holdAfterEffect: ((event: ReceivedEvent<unknown>) => Promise<void>) | undefined;
  const wrapped = new Proxy(shared, {
    get(target, property) {
      if (property !== 'subscribe') return passThrough(target, property);
      return async (...[topic, options]: Parameters<EventBus['subscribe']>) => {
        const handler: EventHandler<unknown> = async (event) => {
          await (options.handler as EventHandler<unknown>)(event);
          handled.push(event.eventId);
          await holdAfterEffect?.(event);
        };
        const subscription = await target.subscribe(topic, { ...options, handler } as typeof options);
        subscriptions.push(subscription);
        return subscription;
      };
    },
  });
  return {
    bus: wrapped,
    handled,
    subscriptions,
    hold(hook: typeof holdAfterEffect) {
      holdAfterEffect = hook;
    },
  };
}

async function startObservedReplica(env: Record<string, string> = {}) {
  const observed = observedBus(bus);
  const replica = await startReplica({
    databaseUrl: database.url,
    store: redis.open(),
    tokenKeys,
    bus: observed.bus,
    env: { RESERVATION_SWEEP_INTERVAL: '1h', OUTBOX_POLL_INTERVAL: '1h', ...env },
  });
  replicas.push(replica);
  return { replica, ...observed };
}

const FEE = 1_000_000n;

describe('spend settlement from job lifecycle events, delivered at least once', () => {
  let first: Awaited<ReturnType<typeof startObservedReplica>>;

  beforeAll(async () => {
    first = await startObservedReplica();
  });

  async function reservation(): Promise<{ keyId: string; reservationId: string }> {
    const { replica } = first;
    const signInToken = await replica.tokenFor(randomWallet().address);
    const minted = await replica.client.mintKey({
      signInToken,
      spendCapWei: { decimal: (10n * FEE).toString() },
    });
    const keyId = minted.apiKey!.id;
    const outcome = (
      await replica.client.reserveSpend({
        keyId,
        amountWei: { decimal: FEE.toString() },
        requestId: randomUUID(),
      })
    ).outcome;
    if (outcome.case !== 'reserved') throw new Error(`expected a reservation, got ${outcome.case}`);
    return { keyId, reservationId: outcome.value.reservationId };
  }

  const lifecycle = (
    kind: JobLifecycleKind,
    reservationId: string,
    feeWei?: bigint,
    eventId = randomUUID(),
  ) =>
    create(JobLifecycleEventSchema, {
      eventId,
      reservationId,
      kind,
      keyId: 'key',
      feeWei: feeWei === undefined ? undefined : { decimal: feeWei.toString() },
    });

  async function publishAll(messages: ReturnType<typeof lifecycle>[], handled: string[]): Promise<void> {
    const before = handled.length;
    for (const message of messages) await bus.publish(jobLifecycleTopic, message);
    await waitFor(() => handled.length - before >= messages.length || undefined, {
      what: `${messages.length} lifecycle events handled`,
    });
  }

  async function state(keyId: string, reservationId: string) {
    const { db } = first.replica;
    const key = await db.apiKey.findUniqueOrThrow({ where: { id: keyId } });
    const row = await db.spendReservation.findUniqueOrThrow({ where: { id: reservationId } });
    return {
      spent: BigInt(key.spentWei.toFixed()),
      reserved: BigInt(key.reservedWei.toFixed()),
      state: row.state,
    };
  }

  it('counts an answer delivered twice (and published again by the job keeper) once', async () => {
    const { keyId, reservationId } = await reservation();
    const answered = lifecycle(JobLifecycleKind.ANSWERED, reservationId, 700_000n);
    // The same event twice (a redelivery), then the keeper's own answered + released for the job.
    await publishAll(
      [
        answered,
        answered,
        lifecycle(JobLifecycleKind.ANSWERED, reservationId, 700_000n),
        lifecycle(JobLifecycleKind.RELEASED, reservationId, 700_000n),
      ],
      first.handled,
    );

    expect(first.handled.filter((id) => id === answered.eventId)).toHaveLength(2);
    expect(await state(keyId, reservationId)).toEqual({ spent: 700_000n, reserved: 0n, state: 'committed' });
  });

  it('settles right whatever order the runner and the keeper were heard in', async () => {
    // The runner's failure, the job's late live events, then the keeper's answer (twice).
    const late = await reservation();
    const answered = lifecycle(JobLifecycleKind.ANSWERED, late.reservationId, FEE);
    await publishAll(
      [
        lifecycle(JobLifecycleKind.FAILED, late.reservationId),
        lifecycle(JobLifecycleKind.SUBMITTED, late.reservationId),
        lifecycle(JobLifecycleKind.COMPLETED, late.reservationId),
        answered,
        answered,
      ],
      first.handled,
    );
    // Spend is a fact: the answer counts after the release, once; the live events did not hold it again.
    expect(await state(late.keyId, late.reservationId)).toEqual({
      spent: FEE,
      reserved: 0n,
      state: 'committed',
    });

    // Live events redelivered after the answer change nothing; a refund after it (the chain gave the fee
    // back: a dispute won, say) leaves nothing spent.
    const done = await reservation();
    const submitted = lifecycle(JobLifecycleKind.SUBMITTED, done.reservationId);
    await publishAll(
      [
        submitted,
        lifecycle(JobLifecycleKind.ANSWERED, done.reservationId, 600_000n),
        submitted,
        lifecycle(JobLifecycleKind.REFUNDED, done.reservationId),
      ],
      first.handled,
    );
    expect(await state(done.keyId, done.reservationId)).toEqual({
      spent: 0n,
      reserved: 0n,
      state: 'refunded',
    });
  });

  it('settles once when a replica applied an event but died before acknowledging it, and another got it again', async () => {
    const { keyId, reservationId } = await reservation();
    const answered = lifecycle(JobLifecycleKind.ANSWERED, reservationId, 800_000n);
    let entered = (): void => undefined;
    const inFlight = new Promise<void>((resolve) => (entered = resolve));
    let crash = (): void => undefined;
    const crashed = new Promise<void>((resolve) => (crash = resolve));
    first.hold(async (event) => {
      if (event.eventId !== answered.eventId) return;
      entered();
      await crashed;
      throw new Error('replica died after the commit, before acknowledging');
    });

    await bus.publish(jobLifecycleTopic, answered);
    await inFlight;
    const second = await startObservedReplica();
    const dying = bus.simulateConsumerCrash(first.subscriptions[0]!, 'killed');
    crash();
    await dying;

    await waitFor(() => second.handled.includes(answered.eventId) || undefined, {
      what: 'the other replica to get the event again',
    });
    expect(first.handled.filter((id) => id === answered.eventId)).toHaveLength(1);
    expect(await state(keyId, reservationId)).toEqual({ spent: 800_000n, reserved: 0n, state: 'committed' });
    first.hold(undefined);
    bus.simulateConsumerRecovery(first.subscriptions[0]!);
  });
});

describe('the key-event outbox relay', () => {
  let db: PrismaClient;
  const received: Array<{ eventId: string; wallet: string; kind: KeyEventKind }> = [];

  beforeAll(async () => {
    db = openDatabase({ connection: database.url, poolSize: 6 });
    await bus.subscribe(keyEventsTopic, {
      group: 'relay-test',
      handler: async ({ eventId, message }: ReceivedEvent<KeyEvent>) => {
        received.push({ eventId, wallet: message.wallet?.hex.toLowerCase() ?? '', kind: message.kind });
      },
    });
  });

  afterAll(async () => {
    await db?.$disconnect();
  });

  /** Commits `count` key changes of one wallet into the outbox (as key changes do), returning their ids in order. */
  async function changes(count: number): Promise<{ wallet: string; eventIds: string[] }> {
    const wallet = parseWalletAddress(randomWallet().address);
    for (let index = 0; index < count; index += 1) {
      await inTransaction(db, (tx) =>
        recordKeyChange(tx, {
          kind: index % 2 === 0 ? KeyEventKind.MINTED : KeyEventKind.REVOKED,
          wallet,
          keyId: randomUUID(),
          prefix: 'svc_abcdefg',
        }),
      );
    }
    const rows = await db.keyEventOutbox.findMany({
      where: { wallet: wallet.lowercase },
      orderBy: { sequence: 'asc' },
      select: { eventId: true },
    });
    return { wallet: wallet.lowercase, eventIds: rows.map((row) => row.eventId) };
  }

  const receivedFor = (wallet: string) =>
    received.filter((event) => event.wallet === wallet).map((e) => e.eventId);
  const pending = () => db.keyEventOutbox.count({ where: { publishedAt: null } });
  const relayOn = (target: EventBus, batchSize = 100) =>
    new OutboxRelay(db, target, { pollIntervalMs: 60_000, batchSize }, silentLogger);

  it('publishes the same events again, same ids, when a pass died between publishing and marking them', async () => {
    const { wallet, eventIds } = await changes(3);
    const diesAfterPublishing = new Proxy(bus, {
      get(target, property) {
        if (property !== 'publishBatch') return passThrough(target, property);
        return async (...args: Parameters<EventBus['publishBatch']>) => {
          await target.publishBatch(...args);
          throw new Error('process died before marking the events published');
        };
      },
    });

    await expect(relayOn(diesAfterPublishing).publishBatch()).rejects.toThrow('process died');
    expect(await pending()).toBe(3);
    await relayOn(bus).drain();
    expect(await pending()).toBe(0);

    await waitFor(() => receivedFor(wallet).length === 6 || undefined, { what: 'both passes delivered' });
    // In order within each pass, and the redelivery carries the original ids: dedupe by id applies each once.
    expect(receivedFor(wallet)).toEqual([...eventIds, ...eventIds]);
    const applied: string[] = [];
    const apply = dedupeByEventId(new InMemoryProcessedEventIds(), async (event) => {
      applied.push(event.eventId);
    });
    for (const eventId of receivedFor(wallet)) await apply({ eventId } as ReceivedEvent<unknown>);
    expect(applied).toEqual(eventIds);
  });

  it('publishes each event once, in order per wallet, while two replicas relay at the same time', async () => {
    const wallets = await Promise.all([1, 2, 3].map(() => changes(5)));
    let publishing = 0;
    let mostAtOnce = 0;
    const slow = new Proxy(bus, {
      get(target, property) {
        if (property !== 'publishBatch') return passThrough(target, property);
        return async (...args: Parameters<EventBus['publishBatch']>) => {
          publishing += 1;
          mostAtOnce = Math.max(mostAtOnce, publishing);
          try {
            await sleep(30);
            await target.publishBatch(...args);
          } finally {
            publishing -= 1;
          }
        };
      },
    });
    const [a, b] = [relayOn(slow, 4), relayOn(slow, 4)];

    const turns: number[] = [];
    while ((await pending()) > 0) {
      turns.push(...(await Promise.all([a.publishBatch(), b.publishBatch()])));
    }

    expect(mostAtOnce).toBe(1);
    expect(turns).toContain(0); // a replica that found the turn taken skipped it
    for (const { wallet, eventIds } of wallets) {
      await waitFor(() => receivedFor(wallet).length >= 5 || undefined, { what: `the events of ${wallet}` });
      expect(receivedFor(wallet)).toEqual(eventIds);
    }
  });

  it('keeps the events and frees the turn when publishing times out', async () => {
    const { wallet, eventIds } = await changes(2);
    const unreachable = new EmbeddedEventBus({ publishTimeoutMs: 100 });
    const delivered: string[] = [];
    await unreachable.subscribe(keyEventsTopic, {
      group: 'g',
      handler: async (event) => void delivered.push(event.eventId),
    });
    try {
      unreachable.simulateBrokerOutage(true);
      await expect(relayOn(unreachable).publishBatch()).rejects.toBeInstanceOf(PublishTimeoutError);
      expect(await pending()).toBe(2);
      // The next replica gets its turn at once (the lock went with the rolled-back transaction).
      await expect(relayOn(unreachable).publishBatch()).rejects.toBeInstanceOf(PublishTimeoutError);

      unreachable.simulateBrokerOutage(false);
      await relayOn(unreachable).drain();
      expect(await pending()).toBe(0);
      await waitFor(() => delivered.length === 2 || undefined, { what: 'the two events' });
      expect(delivered).toEqual(eventIds);
      expect(receivedFor(wallet)).toEqual([]);
    } finally {
      await unreachable.close();
    }
  });
});

describe('a replica started while the brokers cannot be reached', () => {
  it('starts and serves, and consumes job lifecycle events once they are back', async () => {
    let down = true;
    const observed = observedBus(bus);
    const unreachable = new Proxy(observed.bus, {
      get(target, property) {
        if (property === 'ensureTopics')
          return (topics: Parameters<EventBus['ensureTopics']>[0]) =>
            down ? Promise.reject(new Error('connect ECONNREFUSED')) : target.ensureTopics(topics);
        return passThrough(target, property);
      },
    });
    const replica = await startReplica({
      databaseUrl: database.url,
      store: redis.open(),
      tokenKeys,
      bus: unreachable,
      env: { RESERVATION_SWEEP_INTERVAL: '1h', OUTBOX_POLL_INTERVAL: '1h' },
    });
    replicas.push(replica);
    expect(observed.subscriptions).toHaveLength(0);
    expect(await replica.client.getJwks({})).toBeDefined();

    down = false;
    await waitFor(() => observed.subscriptions.length === 1 || undefined, {
      what: 'the lifecycle consumer subscribed once the brokers are back',
      timeoutMs: 10_000,
    });
    expect(observed.subscriptions[0]!.health()).toMatchObject({ topic: jobLifecycleTopic.name, live: true });
  });
});
