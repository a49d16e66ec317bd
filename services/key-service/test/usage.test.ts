import { randomBytes, randomUUID } from 'node:crypto';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EmbeddedEventBus, jobLifecycleTopic } from '@svc/platform';
import {
  JobLifecycleEventSchema,
  JobLifecycleKind,
  PaymentPath,
  type JobLifecycleEvent,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import type { UsageRecord } from '@svc/proto/gen/svc/key/v1/usage_record_pb';
import { createTestDatabase, waitFor, type TestDatabase } from '@svc/testkit';
import { getAddress } from 'ethers';
import { applyMigrations } from '../src/db/migrate.js';
import { isDataException, usageRecordingHandler, type UsageLog } from '../src/usage/usage-log.js';
import { generateSigningKey, TokenKeyRing } from '../src/signin/token-key-ring.js';
import { errorCodeOf } from './support/errors.js';
import { silentLogger, startReplica, type KeyServiceReplica } from './support/key-service-harness.js';
import { randomWallet } from './support/sign-in.js';
import { createTestStore, type TestStore } from './support/test-store.js';

// The usage history: one row per call from its lifecycle events, whatever the redeliveries, the order
// and the number of replicas; a wallet sees its keys' calls and its own per-call payments only; pages
// stay stable while calls are recorded.

let database: TestDatabase;
let redis: TestStore;
let bus: EmbeddedEventBus;
let first: KeyServiceReplica;
let second: KeyServiceReplica;

beforeAll(async () => {
  database = await createTestDatabase({ prefix: 'ks', migrate: (url) => applyMigrations(url) });
  redis = createTestStore();
  bus = new EmbeddedEventBus({ handlerRetry: { initialDelayMs: 10, maxDelayMs: 50 } });
  const signing = await generateSigningKey();
  const tokenKeys = new TokenKeyRing(signing.key, [signing.verification]);
  const env = { RESERVATION_SWEEP_INTERVAL: '1h', OUTBOX_POLL_INTERVAL: '1h' };
  // Two replicas in the one lifecycle consumer group, as a deployment runs them.
  first = await startReplica({ databaseUrl: database.url, store: redis.open(), tokenKeys, bus, env });
  second = await startReplica({ databaseUrl: database.url, store: redis.open(), tokenKeys, bus, env });
});

afterAll(async () => {
  await first?.close();
  await second?.close();
  await bus?.close();
  await redis?.cleanup();
  await database?.drop();
});

const hex = (bytes: number) => `0x${randomBytes(bytes).toString('hex')}`;

interface CallFacts {
  readonly reservationId: string;
  readonly payer: string;
  readonly keyId: string;
  readonly paymentPath: PaymentPath;
  readonly model: string;
}

function call(payer: string, keyId: string, perCall = false): CallFacts {
  return {
    reservationId: randomUUID(),
    payer,
    keyId,
    paymentPath: perCall ? PaymentPath.PREPAID_DEBIT : PaymentPath.DELEGATE,
    model: 'llama3.2:1b',
  };
}

function event(
  facts: CallFacts,
  kind: JobLifecycleKind,
  step: Partial<Exclude<MessageInitShape<typeof JobLifecycleEventSchema>, JobLifecycleEvent>> = {},
): JobLifecycleEvent {
  return create(JobLifecycleEventSchema, {
    eventId: randomUUID(),
    occurredAt: timestampFromDate(new Date()),
    reservationId: facts.reservationId,
    kind,
    requestId: randomUUID(),
    paymentPath: facts.paymentPath,
    payer: { hex: facts.payer },
    keyId: facts.keyId,
    model: facts.model,
    ...step,
  });
}

/** An answered call's events, as the call's replica and the job keeper publish them. */
function answeredCall(facts: CallFacts, calledAt: Date, fee = 700_000n) {
  const job = { jobId: '42', sessionId: '7', attempt: 1, worker: { hex: getAddress(hex(20)) } };
  const tx = hex(32);
  const later = (ms: number) => timestampFromDate(new Date(calledAt.getTime() + ms));
  return {
    tx,
    job,
    events: [
      event(facts, JobLifecycleKind.REQUESTED, { occurredAt: timestampFromDate(calledAt) }),
      event(facts, JobLifecycleKind.SUBMITTED, {
        ...job,
        occurredAt: later(1_000),
        txHash: { hex: tx },
        feeWei: { decimal: fee.toString() },
        droppedMessages: 2,
      }),
      event(facts, JobLifecycleKind.COMPLETED, {
        ...job,
        occurredAt: later(2_000),
        txHash: { hex: hex(32) },
      }),
      event(facts, JobLifecycleKind.ANSWERED, {
        ...job,
        occurredAt: later(2_500),
        feeWei: { decimal: fee.toString() },
        droppedMessages: 2,
        firstOutputMs: 1_800,
        durationMs: 2_400,
      }),
      // The keeper's copy when the job is paid out: same facts, no timings, a block time of its own.
      event(facts, JobLifecycleKind.ANSWERED, {
        ...job,
        occurredAt: later(-5_000),
        feeWei: { decimal: fee.toString() },
      }),
      event(facts, JobLifecycleKind.RELEASED, {
        ...job,
        occurredAt: later(-5_000),
        txHash: { hex: hex(32) },
        feeWei: { decimal: fee.toString() },
      }),
    ],
  };
}

async function newKey(replica: KeyServiceReplica, wallet: string) {
  const signInToken = await replica.tokenFor(wallet);
  const minted = await replica.client.mintKey({ signInToken });
  return { signInToken, keyId: minted.apiKey!.id };
}

async function records(signInToken: string, query: { keyId?: string; limit?: number; cursor?: string } = {}) {
  return first.client.listUsage({ signInToken, ...query });
}

async function usageRows(callId: string): Promise<number> {
  return first.db.usageCall.count({ where: { callId } });
}

function plain(record: UsageRecord) {
  return {
    callId: record.callId,
    calledAt: record.calledAt ? timestampDate(record.calledAt).toISOString() : null,
    keyId: record.keyId,
    payer: record.payer?.hex,
    payment: record.payment,
    model: record.model,
    outcome: record.outcome,
    jobId: record.jobId,
    sessionId: record.sessionId,
    txHash: record.txHash?.hex,
    worker: record.worker?.hex,
    feeWei: record.feeWei?.decimal,
    droppedMessages: record.droppedMessages,
    firstOutputMs: record.firstOutputMs,
    durationMs: record.durationMs,
  };
}

describe('usage recorded from job lifecycle events', () => {
  it('writes one row per call under redelivery, keeper copies and both replicas handling it', async () => {
    const wallet = randomWallet().address;
    const { signInToken, keyId } = await newKey(first, wallet);
    const facts = call(wallet, keyId);
    const calledAt = new Date(Date.now() - 60_000);
    const { events, tx, job } = answeredCall(facts, calledAt);
    // Every event through the shared group, each twice (a redelivery), and the same events handled by
    // both replicas at once (a rebalance that hands a handled, uncommitted event to the other replica).
    for (const message of [...events, ...events]) await bus.publish(jobLifecycleTopic, message);
    await Promise.all(
      events.flatMap((message) => [
        first.service.domain.usage.record(message),
        second.service.domain.usage.record(message),
      ]),
    );
    const expected = {
      callId: facts.reservationId,
      calledAt: calledAt.toISOString(),
      keyId,
      payer: wallet,
      payment: 'api_key',
      model: 'llama3.2:1b',
      outcome: 'answered',
      jobId: '42',
      sessionId: '7',
      txHash: tx,
      worker: job.worker.hex,
      feeWei: '700000',
      droppedMessages: 2,
      firstOutputMs: 1_800,
      durationMs: 2_400,
    };
    await waitFor(
      async () => {
        const page = await records(signInToken);
        return page.records.length === 1 &&
          JSON.stringify(plain(page.records[0]!)) === JSON.stringify(expected)
          ? true
          : undefined;
      },
      { what: 'the usage record of the answered call' },
    );
    // Events handled again after the row is complete change nothing.
    for (const message of events.reverse()) await second.service.domain.usage.record(message);
    const page = await records(signInToken);
    expect(page.records.map(plain)).toEqual([expected]);
    expect(await usageRows(facts.reservationId)).toBe(1);
    expect(page.summary?.outcomes.map((o) => [o.outcome, Number(o.calls)])).toEqual([['answered', 1]]);
    expect(page.summary?.days.map((d) => [d.day, d.keyId, d.spentWei?.decimal, Number(d.calls)])).toEqual([
      [calledAt.toISOString().slice(0, 10), keyId, '700000', 1],
    ]);
  });

  it('gives the same record whatever order the events arrive in', async () => {
    const wallet = randomWallet().address;
    const { signInToken, keyId } = await newKey(first, wallet);
    const inOrder = call(wallet, keyId);
    const reversed = { ...call(wallet, keyId) };
    const calledAt = new Date(Date.now() - 30_000);
    const a = answeredCall(inOrder, calledAt);
    const b = answeredCall(reversed, calledAt);
    for (const message of a.events) await first.service.domain.usage.record(message);
    for (const message of [...b.events].reverse()) await second.service.domain.usage.record(message);
    const listed = (await records(signInToken)).records.map(plain);
    const strip = ({ callId: _c, txHash: _t, worker: _w, ...rest }: ReturnType<typeof plain>) => rest;
    expect(listed).toHaveLength(2);
    expect(strip(listed[0]!)).toEqual(strip(listed[1]!));
    expect(listed[0]!.outcome).toBe('answered');
  });

  it('keeps a diverged stream diverged, records failures with their code and refunds as no fee', async () => {
    const wallet = randomWallet().address;
    const { signInToken, keyId } = await newKey(first, wallet);
    const diverged = call(wallet, keyId);
    const failed = call(wallet, keyId);
    const refused = call(wallet, keyId);
    const job = { jobId: '9', sessionId: '3', attempt: 1 };
    for (const message of [
      event(diverged, JobLifecycleKind.REQUESTED),
      event(diverged, JobLifecycleKind.DIVERGED, { ...job, failureCode: 'stream_diverged', durationMs: 900 }),
      event(diverged, JobLifecycleKind.ANSWERED, { ...job, feeWei: { decimal: '5' } }),
      event(failed, JobLifecycleKind.REQUESTED),
      event(failed, JobLifecycleKind.SUBMITTED, { ...job, jobId: '10', feeWei: { decimal: '5' } }),
      event(failed, JobLifecycleKind.FAILED, { ...job, jobId: '10', failureCode: 'job_failed' }),
      event(failed, JobLifecycleKind.REFUNDED, { jobId: '10', feeWei: { decimal: '5' } }),
      event(refused, JobLifecycleKind.REQUESTED),
      event(refused, JobLifecycleKind.FAILED, { failureCode: 'no_worker_available', durationMs: 30 }),
    ])
      await first.service.domain.usage.record(message);
    const byId = new Map((await records(signInToken)).records.map((r) => [r.callId, plain(r)]));
    expect(byId.get(diverged.reservationId)).toMatchObject({ outcome: 'stream_diverged', feeWei: '5' });
    expect(byId.get(failed.reservationId)).toMatchObject({ outcome: 'job_failed', jobId: '10', feeWei: '0' });
    expect(byId.get(refused.reservationId)).toMatchObject({
      outcome: 'no_worker_available',
      jobId: '',
      feeWei: '0',
      durationMs: 30,
    });
  });
});

describe('events the database cannot hold', () => {
  it('skips them instead of holding up the partition, and records what comes after', async () => {
    const wallet = randomWallet().address;
    const { signInToken, keyId } = await newKey(first, wallet);
    // A value PostgreSQL refuses is a data exception: the handler logs and skips it; an outage it throws.
    const refused = await first.db.$executeRawUnsafe('SELECT 2147483647 + 1').then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isDataException(refused)).toBe(true);
    const failing = (error: unknown) =>
      usageRecordingHandler({ record: () => Promise.reject(error) } as unknown as UsageLog, silentLogger);
    const received = { eventId: 'e', message: event(call(wallet, keyId), JobLifecycleKind.REQUESTED) };
    await expect(failing(refused)(received as never)).resolves.toBeUndefined();
    await expect(failing(new Error('connection refused'))(received as never)).rejects.toThrow(
      'connection refused',
    );
    // The same kinds of values in events are cleaned or bounded, never a reason to fail.
    const odd = call(wallet, keyId);
    await first.service.domain.usage.record(
      event(odd, JobLifecycleKind.SUBMITTED, {
        model: 'llama\u00003.2:1b',
        attempt: 4_000_000_000,
        jobId: '1',
        sessionId: '1',
        occurredAt: { seconds: 10n ** 15n, nanos: 0 },
      }),
    );
    // Through the bus: the odd event and a later one of another call both land.
    const later = call(wallet, keyId);
    await bus.publish(jobLifecycleTopic, event(later, JobLifecycleKind.REQUESTED));
    const listed = await waitFor(
      async () => {
        const page = await records(signInToken);
        return page.records.length === 2 ? page : undefined;
      },
      { what: 'both calls listed' },
    );
    expect(listed.records.find((r) => r.callId === odd.reservationId)?.model).toBe('llama3.2:1b');
  });
});

describe('who sees which calls', () => {
  it('shows a wallet its own keys calls and its own per-call payments, nothing of others', async () => {
    const alice = randomWallet().address;
    const bob = randomWallet().address;
    const aliceKey = await newKey(first, alice);
    const bobKey = await newKey(first, bob);
    const bobToken = await first.tokenFor(bob);
    const aliceCall = call(alice, aliceKey.keyId);
    const bobCall = call(bob, bobKey.keyId);
    const bobPaysPerCall = call(bob, '', true);
    // Bob pays per call with Alice's key: Alice's key's call, and Bob's own payment.
    const bobPaysWithAlicesKey = call(bob, aliceKey.keyId, true);
    for (const facts of [aliceCall, bobCall, bobPaysPerCall, bobPaysWithAlicesKey])
      await first.service.domain.usage.record(event(facts, JobLifecycleKind.REQUESTED));

    const seen = async (token: string, keyId?: string) =>
      (await records(token, keyId ? { keyId } : {})).records.map((r) => r.callId).sort();
    expect(await seen(aliceKey.signInToken)).toEqual(
      [aliceCall.reservationId, bobPaysWithAlicesKey.reservationId].sort(),
    );
    expect(await seen(bobToken)).toEqual(
      [bobCall.reservationId, bobPaysPerCall.reservationId, bobPaysWithAlicesKey.reservationId].sort(),
    );
    // Another wallet's key as the filter shows nothing of it.
    expect(await seen(aliceKey.signInToken, bobKey.keyId)).toEqual([]);
    expect(await seen(bobToken, bobKey.keyId)).toEqual([bobCall.reservationId]);
    const perCall = (await records(bobToken)).records.find((r) => r.callId === bobPaysPerCall.reservationId);
    expect(perCall).toMatchObject({ payment: 'per_call', keyId: '' });
    expect(perCall?.payer?.hex).toBe(bob);
  });

  it('refuses a missing or bad token and invalid queries', async () => {
    const { signInToken } = await newKey(first, randomWallet().address);
    expect(await errorCodeOf(first.client.listUsage({ signInToken: '' }))).toBe('unauthorized');
    expect(await errorCodeOf(first.client.listUsage({ signInToken: 'a.b.c' }))).toBe('unauthorized');
    expect(await errorCodeOf(first.client.listUsage({ signInToken, limit: 201 }))).toBe('invalid_request');
    expect(await errorCodeOf(first.client.listUsage({ signInToken, cursor: 'not-ours' }))).toBe(
      'invalid_request',
    );
    expect(
      await errorCodeOf(
        first.client.listUsage({
          signInToken,
          from: timestampFromDate(new Date('2026-02-01')),
          to: timestampFromDate(new Date('2026-01-01')),
        }),
      ),
    ).toBe('invalid_request');
  });
});

describe('pages', () => {
  it('lists newest first, and pages neither repeat nor skip while calls are recorded', async () => {
    const wallet = randomWallet().address;
    const { signInToken, keyId } = await newKey(first, wallet);
    const base = Date.now() - 3_600_000;
    const made: Array<{ id: string; at: number }> = [];
    // Seven calls, two of them at the same millisecond (ordered by id then).
    for (const offset of [0, 1_000, 2_000, 2_000, 3_000, 4_000, 5_000]) {
      const facts = call(wallet, keyId);
      made.push({ id: facts.reservationId, at: base + offset });
      await first.service.domain.usage.record(
        event(facts, JobLifecycleKind.REQUESTED, { occurredAt: timestampFromDate(new Date(base + offset)) }),
      );
    }
    const expected = [...made].sort((x, y) => y.at - x.at || (x.id < y.id ? 1 : -1)).map((m) => m.id);

    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await records(signInToken, { limit: 3, ...(cursor ? { cursor } : {}) });
      expect(page.summary === undefined).toBe(cursor !== undefined);
      seen.push(...page.records.map((r) => r.callId));
      cursor = page.nextCursor || undefined;
      pages += 1;
      // Newer calls recorded between pages come first in a new listing, not in the pages under way.
      await first.service.domain.usage.record(event(call(wallet, keyId), JobLifecycleKind.REQUESTED));
    } while (cursor !== undefined);
    expect(pages).toBe(3);
    expect(seen).toEqual(expected);

    // A time range: [from, to) of the oldest three.
    const ranged = await records(signInToken, {});
    expect(ranged.records).toHaveLength(10);
    const window = await first.client.listUsage({
      signInToken,
      from: timestampFromDate(new Date(base)),
      to: timestampFromDate(new Date(base + 2_000)),
    });
    expect(window.records.map((r) => r.callId)).toEqual(expected.slice(-2));
  });
});
