import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, waitUntil, type TestDatabase } from '@svc/testkit';
import { create } from '@bufbuild/protobuf';
import { durationFromMs } from '@bufbuild/protobuf/wkt';
import {
  JobLifecycleEventSchema,
  JobLifecycleKind,
  PaymentPath,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { LimitKind } from '@svc/proto/gen/svc/key/v1/api_key_pb';
import { SpendReservationState } from '@svc/proto/gen/svc/key/v1/spend_reservation_pb';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger, EmbeddedEventBus, type EventBus, jobLifecycleTopic } from '@svc/platform';
import { applyMigrations } from '../src/db/migrate.js';
import { lifecycleSettlementHandler } from '../src/spend/lifecycle-settlement.js';
import { generateSigningKey, TokenKeyRing } from '../src/signin/token-key-ring.js';
import { errorCodeOf } from './support/errors.js';
import { silentLogger, startReplica, type KeyServiceReplica } from './support/key-service-harness.js';
import { randomWallet } from './support/sign-in.js';
import { createTestStore, type TestStore } from './support/test-store.js';

let database: TestDatabase;
let redis: TestStore;
let bus: EventBus;
let replica: KeyServiceReplica;

beforeAll(async () => {
  database = await createTestDatabase({ prefix: 'ks', migrate: (url) => applyMigrations(url) });
  redis = createTestStore();
  bus = new EmbeddedEventBus({ handlerRetry: { initialDelayMs: 10, maxDelayMs: 50 } });
  const signing = await generateSigningKey();
  replica = await startReplica({
    databaseUrl: database.url,
    store: redis.open(),
    tokenKeys: new TokenKeyRing(signing.key, [signing.verification]),
    bus,
    // The sweeper is driven by hand below.
    env: { RESERVATION_SWEEP_INTERVAL: '1h' },
  });
});

afterAll(async () => {
  await replica?.close();
  await bus?.close();
  await redis?.cleanup();
  await database?.drop();
});

const FEE = 1_000_000n;

async function mintKey(spendCapWei?: bigint) {
  const owner = { signInToken: await replica.tokenFor(randomWallet().address) };
  const minted = await replica.client.mintKey({
    signInToken: owner.signInToken,
    spendCapWei: spendCapWei === undefined ? undefined : { decimal: spendCapWei.toString() },
  });
  return { owner, keyId: minted.apiKey!.id };
}

function reserve(keyId: string, amount: bigint = FEE, requestId: string = randomUUID(), ttlMs?: number) {
  return replica.client.reserveSpend({
    keyId,
    amountWei: { decimal: amount.toString() },
    requestId,
    ttl: ttlMs === undefined ? undefined : durationFromMs(ttlMs),
  });
}

async function reservedId(keyId: string, amount: bigint = FEE): Promise<string> {
  const outcome = (await reserve(keyId, amount)).outcome;
  if (outcome.case !== 'reserved') throw new Error(`expected a reservation, got ${outcome.case}`);
  return outcome.value.reservationId;
}

async function totals(keyId: string) {
  const key = await replica.db.apiKey.findUniqueOrThrow({ where: { id: keyId } });
  return { spent: BigInt(key.spentWei.toFixed()), reserved: BigInt(key.reservedWei.toFixed()) };
}

async function listed(owner: { signInToken: string }, keyId: string) {
  const keys = (await replica.client.listKeys({ signInToken: owner.signInToken })).apiKeys;
  return keys.find((key) => key.id === keyId)!;
}

describe('reservations', () => {
  it('grants exactly 10 of 100 parallel reservations against a cap of 10 fees', async () => {
    const { keyId } = await mintKey(10n * FEE);
    const outcomes = await Promise.all(Array.from({ length: 100 }, () => reserve(keyId)));
    const granted = outcomes.filter((response) => response.outcome.case === 'reserved');
    const refused = outcomes.filter((response) => response.outcome.case === 'refused');
    expect(granted).toHaveLength(10);
    expect(refused).toHaveLength(90);
    expect(refused[0]!.outcome.value).toMatchObject({
      spendCapWei: { decimal: (10n * FEE).toString() },
      spentWei: { decimal: '0' },
      reservedWei: { decimal: (10n * FEE).toString() },
    });
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: 10n * FEE });
  });

  it('returns the same reservation for a repeated request id, also under concurrency', async () => {
    const { keyId } = await mintKey(10n * FEE);
    const requestId = randomUUID();
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => reserve(keyId, FEE, requestId)));
    const ids = new Set(
      outcomes.map((response) =>
        response.outcome.case === 'reserved' ? response.outcome.value.reservationId : '',
      ),
    );
    expect(ids.size).toBe(1);
    expect([...ids][0]).not.toBe('');
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: FEE });
  });

  it('reserves without limit on a key with no cap', async () => {
    const { keyId } = await mintKey();
    const outcome = (await reserve(keyId, 10n ** 30n)).outcome;
    expect(outcome.case).toBe('reserved');
  });

  it('refuses a revoked or unknown key with invalid_api_key', async () => {
    const { owner, keyId } = await mintKey(10n * FEE);
    await replica.client.revokeKey({ signInToken: owner.signInToken, keyId });
    expect(await errorCodeOf(reserve(keyId))).toBe('invalid_api_key');
    expect(await errorCodeOf(reserve(randomUUID()))).toBe('invalid_api_key');
  });

  it('refuses a ttl beyond the maximum and a missing request id with invalid_request', async () => {
    const { keyId } = await mintKey();
    expect(await errorCodeOf(reserve(keyId, FEE, randomUUID(), 2 * 60 * 60_000))).toBe('invalid_request');
    expect(await errorCodeOf(reserve(keyId, FEE, ''))).toBe('invalid_request');
  });
});

describe('settlement', () => {
  it('commits at the fee charged and frees the rest of the hold', async () => {
    const { owner, keyId } = await mintKey(10n * FEE);
    const reservationId = await reservedId(keyId);
    const committed = await replica.client.commitSpend({ reservationId, chargedWei: { decimal: '600000' } });
    expect(committed.state).toBe(SpendReservationState.COMMITTED);
    expect(await totals(keyId)).toEqual({ spent: 600_000n, reserved: 0n });
    expect((await listed(owner, keyId)).spentWei?.decimal).toBe('600000');
  });

  it('refuses to commit more than was reserved', async () => {
    const { keyId } = await mintKey(10n * FEE);
    const reservationId = await reservedId(keyId);
    expect(
      await errorCodeOf(
        replica.client.commitSpend({ reservationId, chargedWei: { decimal: (FEE + 1n).toString() } }),
      ),
    ).toBe('invalid_request');
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: FEE });
  });

  it('gives a released reservation back (a failed call costs nothing)', async () => {
    const { keyId } = await mintKey(FEE);
    const reservationId = await reservedId(keyId);
    expect((await reserve(keyId)).outcome.case).toBe('refused');
    expect((await replica.client.releaseSpend({ reservationId })).state).toBe(SpendReservationState.RELEASED);
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: 0n });
    expect((await reserve(keyId)).outcome.case).toBe('reserved');
  });

  it('counts each reservation once under concurrent commits and releases: the hold once, the fee once', async () => {
    const { keyId } = await mintKey(100n * FEE);
    const reservationIds = await Promise.all(Array.from({ length: 10 }, () => reservedId(keyId)));
    const results = await Promise.all(
      reservationIds.flatMap((reservationId) => [
        replica.client.commitSpend({ reservationId, chargedWei: { decimal: FEE.toString() } }),
        replica.client.releaseSpend({ reservationId }),
        replica.client.commitSpend({ reservationId, chargedWei: { decimal: FEE.toString() } }),
        replica.client.releaseSpend({ reservationId }),
      ]),
    );
    // Whatever order they ran in, a commit is never undone: every commit reports COMMITTED and the fee
    // of every reservation counts exactly once, its hold subtracted exactly once.
    results.forEach((result, index) => {
      if (index % 2 === 0) expect(result.state).toBe(SpendReservationState.COMMITTED);
    });
    expect(await totals(keyId)).toEqual({ spent: 10n * FEE, reserved: 0n });
  });

  it('counts a commit that comes after a release: spend is a fact, not a hold', async () => {
    const { keyId } = await mintKey(FEE + FEE / 2n);
    const reservationId = await reservedId(keyId);
    expect((await replica.client.releaseSpend({ reservationId })).state).toBe(SpendReservationState.RELEASED);
    const late = await replica.client.commitSpend({ reservationId, chargedWei: { decimal: FEE.toString() } });
    expect(late.state).toBe(SpendReservationState.COMMITTED);
    expect(await totals(keyId)).toEqual({ spent: FEE, reserved: 0n });
    // The job that ran is paid for: the next fee no longer fits under the cap.
    expect((await reserve(keyId)).outcome.case).toBe('refused');
    // Repeating the commit or releasing now changes nothing.
    await replica.client.commitSpend({ reservationId, chargedWei: { decimal: FEE.toString() } });
    expect((await replica.client.releaseSpend({ reservationId })).state).toBe(
      SpendReservationState.COMMITTED,
    );
    expect(await totals(keyId)).toEqual({ spent: FEE, reserved: 0n });
  });
});

describe('spend cap rules', () => {
  it('refuses with the cap when the next fee would pass it, and counts only answered calls', async () => {
    const { keyId } = await mintKey(2n * FEE + FEE / 2n);
    for (let call = 0; call < 2; call += 1) {
      const reservationId = await reservedId(keyId);
      await replica.client.commitSpend({ reservationId, chargedWei: { decimal: FEE.toString() } });
    }
    const refused = (await reserve(keyId)).outcome;
    expect(refused.case).toBe('refused');
    expect(refused.value).toMatchObject({ spendCapWei: { decimal: (2n * FEE + FEE / 2n).toString() } });
    expect((await reserve(keyId, FEE / 2n)).outcome.case).toBe('reserved');
  });

  it('refuses the next call once the cap is set below what was spent, and a raised cap lets it through', async () => {
    const { owner, keyId } = await mintKey();
    for (let call = 0; call < 3; call += 1) {
      const reservationId = await reservedId(keyId);
      await replica.client.commitSpend({ reservationId, chargedWei: { decimal: FEE.toString() } });
    }
    const lowered = await replica.client.updateSpendCap({
      signInToken: owner.signInToken,
      keyId,
      spendCap: { case: 'capWei', value: { decimal: FEE.toString() } },
    });
    expect(lowered.apiKey!.spentWei?.decimal).toBe((3n * FEE).toString());
    expect((await reserve(keyId)).outcome.case).toBe('refused');
    await replica.client.updateSpendCap({
      signInToken: owner.signInToken,
      keyId,
      spendCap: { case: 'capWei', value: { decimal: (4n * FEE).toString() } },
    });
    expect((await reserve(keyId)).outcome.case).toBe('reserved');
    expect((await reserve(keyId)).outcome.case).toBe('refused');
    await replica.client.updateSpendCap({
      signInToken: owner.signInToken,
      keyId,
      spendCap: { case: 'noCap', value: {} },
    });
    expect((await reserve(keyId)).outcome.case).toBe('reserved');
  });
});

describe('sweeper', () => {
  it('releases a reservation whose TTL passed, once, leaving live ones held', async () => {
    const { keyId } = await mintKey(10n * FEE);
    const lapsing = (await reserve(keyId, FEE, randomUUID(), 100)).outcome;
    const live = (await reserve(keyId, FEE, randomUUID(), 60_000)).outcome;
    if (lapsing.case !== 'reserved' || live.case !== 'reserved') throw new Error('expected two reservations');
    await sleep(250);
    // Two sweeps at once, as two replicas would run them.
    const [first, second] = await Promise.all([
      replica.service.domain.ledger.releaseLapsed(100),
      replica.service.domain.ledger.releaseLapsed(100),
    ]);
    expect(first + second).toBeGreaterThanOrEqual(1);
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: FEE });
    // The sweep gave the hold back, but the job it held for was answered after all: the late commit still
    // counts its fee, so the cap is not passed by calls granted meanwhile.
    const late = await replica.client.commitSpend({
      reservationId: lapsing.value.reservationId,
      chargedWei: { decimal: FEE.toString() },
    });
    expect(late.state).toBe(SpendReservationState.COMMITTED);
    expect(await totals(keyId)).toEqual({ spent: FEE, reserved: FEE });
  });

  it('refuses over the cap after a lapsed hold is committed late', async () => {
    const cap = 1_000n;
    const { keyId } = await mintKey(cap);
    const first = (await reserve(keyId, 600n, randomUUID(), 100)).outcome;
    if (first.case !== 'reserved') throw new Error('expected a reservation');
    await sleep(250);
    await replica.service.domain.ledger.releaseLapsed(100);
    await replica.client.commitSpend({
      reservationId: first.value.reservationId,
      chargedWei: { decimal: '600' },
    });
    expect((await reserve(keyId, 600n)).outcome.case).toBe('refused');
    expect(await totals(keyId)).toEqual({ spent: 600n, reserved: 0n });
  });

  it('keeps a hold alive while lifecycle events say its job is live', async () => {
    const handle = lifecycleSettlementHandler(replica.service.domain.ledger, silentLogger);
    const { keyId } = await mintKey(10n * FEE);
    const outcome = (await reserve(keyId, FEE, randomUUID(), 200)).outcome;
    if (outcome.case !== 'reserved') throw new Error('expected a reservation');
    await handle(lifecycleReceived(JobLifecycleKind.SUBMITTED, outcome.value.reservationId));
    await sleep(400);
    await replica.service.domain.ledger.releaseLapsed(100);
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: FEE });
    const row = await replica.db.spendReservation.findUniqueOrThrow({
      where: { id: outcome.value.reservationId },
    });
    expect(row.state).toBe('held');
    expect(row.expiresAt.getTime()).toBeGreaterThan(Date.now() + 60_000);
  });
});

function lifecycleEvent(kind: JobLifecycleKind, reservationId: string, feeWei?: bigint) {
  return create(JobLifecycleEventSchema, {
    eventId: randomUUID(),
    reservationId,
    kind,
    feeWei: feeWei === undefined ? undefined : { decimal: feeWei.toString() },
  });
}

/** An event as the bus hands it to a handler. */
function lifecycleReceived(kind: JobLifecycleKind, reservationId: string, feeWei?: bigint) {
  const message = lifecycleEvent(kind, reservationId, feeWei);
  return {
    topic: jobLifecycleTopic.name,
    message,
    eventId: message.eventId,
    key: reservationId,
    typeName: message.$typeName,
    requestId: undefined,
    publishedAt: new Date(),
    attempt: 1,
  };
}

describe('job lifecycle events', () => {
  it('settles reservations from events on the bus: answered commits at the fee, failed releases', async () => {
    const { keyId } = await mintKey(10n * FEE);
    const answered = await reservedId(keyId);
    const failed = await reservedId(keyId);
    await bus.publish(jobLifecycleTopic, lifecycleEvent(JobLifecycleKind.ANSWERED, answered, 700_000n));
    await bus.publish(jobLifecycleTopic, lifecycleEvent(JobLifecycleKind.FAILED, failed));
    await waitUntil(
      () => totals(keyId),
      ({ spent, reserved }) => spent === 700_000n && reserved === 0n,
      { what: 'the answered reservation spent and the failed one released' },
    );
  });

  it('lets the first commit win: later, repeated or contradicting events change nothing', async () => {
    const handle = lifecycleSettlementHandler(replica.service.domain.ledger, silentLogger);
    const { keyId } = await mintKey(10n * FEE);
    const reservationId = await reservedId(keyId);
    await handle(lifecycleReceived(JobLifecycleKind.ANSWERED, reservationId, 700_000n));
    await handle(lifecycleReceived(JobLifecycleKind.ANSWERED, reservationId, FEE));
    await handle(lifecycleReceived(JobLifecycleKind.FAILED, reservationId));
    await handle(lifecycleReceived(JobLifecycleKind.DIVERGED, reservationId));
    expect(await totals(keyId)).toEqual({ spent: 700_000n, reserved: 0n });

    // A release is final for the hold, not for spend: an answer after it still counts, once.
    const released = await reservedId(keyId);
    await handle(lifecycleReceived(JobLifecycleKind.FAILED, released));
    await handle(lifecycleReceived(JobLifecycleKind.ANSWERED, released, FEE));
    await handle(lifecycleReceived(JobLifecycleKind.ANSWERED, released, FEE));
    expect(await totals(keyId)).toEqual({ spent: 700_000n + FEE, reserved: 0n });
  });

  it('keeps the hold of a diverged call (its job is Completed on chain) until the job is refunded or released: never above the cap', async () => {
    const handle = lifecycleSettlementHandler(replica.service.domain.ledger, silentLogger);
    // A cap of one fee: a diverged call must not free room for a second call while its job can still be paid.
    const { keyId } = await mintKey(FEE);
    const diverged = await reservedId(keyId);
    await handle(lifecycleReceived(JobLifecycleKind.COMPLETED, diverged));
    await handle(lifecycleReceived(JobLifecycleKind.DIVERGED, diverged));
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: FEE });
    expect((await reserve(keyId, FEE)).outcome.case).toBe('refused');
    // Not refunded in time: the job is released, and its fee is counted once, from the hold, at the cap.
    await handle(lifecycleReceived(JobLifecycleKind.ANSWERED, diverged, FEE));
    await handle(lifecycleReceived(JobLifecycleKind.RELEASED, diverged, FEE));
    expect(await totals(keyId)).toEqual({ spent: FEE, reserved: 0n });

    // Refunded (refundUndelivered): the hold is given back and nothing is spent.
    const { keyId: other } = await mintKey(FEE);
    const refunded = await reservedId(other);
    await handle(lifecycleReceived(JobLifecycleKind.DIVERGED, refunded));
    expect(await totals(other)).toEqual({ spent: 0n, reserved: FEE });
    await handle(lifecycleReceived(JobLifecycleKind.REFUNDED, refunded, FEE));
    expect(await totals(other)).toEqual({ spent: 0n, reserved: 0n });
    expect((await reserve(other, FEE)).outcome.case).toBe('reserved');
  });

  it('counts nothing for a job refunded on chain: it takes back a commit made at delivery, and no later commit counts', async () => {
    const handle = lifecycleSettlementHandler(replica.service.domain.ledger, silentLogger);
    const { keyId } = await mintKey(2n * FEE);
    // The gateway committed a fast-path answer; the worker never committed it, and the job was refunded.
    const delivered = await reservedId(keyId);
    await replica.client.commitSpend({ reservationId: delivered, chargedWei: { decimal: FEE.toString() } });
    expect(await totals(keyId)).toEqual({ spent: FEE, reserved: 0n });
    await handle(lifecycleReceived(JobLifecycleKind.REFUNDED, delivered, FEE));
    await handle(lifecycleReceived(JobLifecycleKind.REFUNDED, delivered, FEE));
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: 0n });
    // A commit after the refund (the gateway's, late) changes nothing and says so.
    const late = await replica.client.commitSpend({
      reservationId: delivered,
      chargedWei: { decimal: FEE.toString() },
    });
    expect(late.state).toBe(SpendReservationState.REFUNDED);
    await handle(lifecycleReceived(JobLifecycleKind.ANSWERED, delivered, FEE));
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: 0n });

    // Refunded while held, and refunded after a release: nothing spent, nothing held, nothing counts later.
    const held = await reservedId(keyId);
    const released = await reservedId(keyId);
    await handle(lifecycleReceived(JobLifecycleKind.FAILED, released));
    await handle(lifecycleReceived(JobLifecycleKind.REFUNDED, held, FEE));
    await handle(lifecycleReceived(JobLifecycleKind.REFUNDED, released, FEE));
    await handle(lifecycleReceived(JobLifecycleKind.ANSWERED, released, FEE));
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: 0n });
    // The whole cap is free again.
    expect((await reserve(keyId, 2n * FEE)).outcome.case).toBe('reserved');
  });

  it('takes back a commit exactly once when the refund races commits from the gateway and the events', async () => {
    const { keyId } = await mintKey();
    const reservationIds = await Promise.all(Array.from({ length: 10 }, () => reservedId(keyId)));
    await Promise.all(
      reservationIds.flatMap((reservationId) => [
        replica.client.commitSpend({ reservationId, chargedWei: { decimal: FEE.toString() } }),
        replica.service.domain.ledger.refund(reservationId, 'event'),
        replica.service.domain.ledger.commit(reservationId, FEE, 'event'),
        replica.service.domain.ledger.refund(reservationId, 'event'),
      ]),
    );
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: 0n });
  });

  it('ignores other kinds and reservations it does not hold, and acknowledges a fee above the hold', async () => {
    const warnings: string[] = [];
    const logger = createLogger({
      service: 'key-service',
      destination: {
        write: (line: string) => void warnings.push(...(line.includes('"level":"warn"') ? [line] : [])),
      },
    });
    const handle = lifecycleSettlementHandler(replica.service.domain.ledger, logger);
    const { keyId } = await mintKey(10n * FEE);
    const reservationId = await reservedId(keyId);
    for (const kind of [JobLifecycleKind.REQUESTED, JobLifecycleKind.SUBMITTED, JobLifecycleKind.COMPLETED]) {
      await handle(lifecycleReceived(kind, reservationId, FEE));
    }
    await handle(lifecycleReceived(JobLifecycleKind.ANSWERED, randomUUID(), FEE));
    await handle(lifecycleReceived(JobLifecycleKind.ANSWERED, 'x402-payment-reservation', FEE));
    expect(warnings).toHaveLength(2); // unknown reservations: worth a warning
    // A call paid per call with no key is keyed by the settler's reservation: not ours, not a warning.
    const perCall = lifecycleReceived(JobLifecycleKind.ANSWERED, randomUUID(), FEE);
    perCall.message.paymentPath = PaymentPath.PREPAID_DEBIT;
    await handle(perCall);
    expect(warnings).toHaveLength(2);
    // A fee above the hold cannot be committed; retrying would never help, so the event is acknowledged.
    await expect(
      handle(lifecycleReceived(JobLifecycleKind.ANSWERED, reservationId, FEE + 1n)),
    ).resolves.toBeUndefined();
    expect(await totals(keyId)).toEqual({ spent: 0n, reserved: FEE });
  });
});

describe('limit hits', () => {
  it('counts each kind, once per request id', async () => {
    const { owner, keyId } = await mintKey();
    const requestId = randomUUID();
    await Promise.all(
      Array.from({ length: 5 }, () =>
        replica.client.recordLimitHit({ keyId, kind: LimitKind.RATE, requestId }),
      ),
    );
    await replica.client.recordLimitHit({ keyId, kind: LimitKind.RATE, requestId: randomUUID() });
    await replica.client.recordLimitHit({ keyId, kind: LimitKind.CONCURRENCY, requestId });
    await replica.client.recordLimitHit({ keyId, kind: LimitKind.SPEND_CAP, requestId: '' });
    await replica.client.recordLimitHit({ keyId, kind: LimitKind.SPEND_CAP, requestId: '' });
    await replica.client.recordLimitHit({ keyId, kind: LimitKind.SESSION_OPENS, requestId: randomUUID() });
    expect((await listed(owner, keyId)).limitHits).toMatchObject({
      rate: 2n,
      concurrency: 1n,
      spendCap: 2n,
      sessionOpens: 1n,
    });
    expect(
      await errorCodeOf(replica.client.recordLimitHit({ keyId, kind: LimitKind.UNSPECIFIED, requestId })),
    ).toBe('invalid_request');
  });
});
