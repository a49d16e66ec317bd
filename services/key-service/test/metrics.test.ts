import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, sampleValue, waitFor, type TestDatabase } from '@svc/testkit';
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { applyMigrations } from '../src/db/migrate.js';
import { generateSigningKey, TokenKeyRing } from '../src/signin/token-key-ring.js';
import { errorCodeOf } from './support/errors.js';
import { startReplica, TEST_SIWE, type KeyServiceReplica } from './support/key-service-harness.js';
import { randomWallet, signIn } from './support/sign-in.js';
import { createTestStore, type TestStore } from './support/test-store.js';

// The key-service's own metrics, counted where the events happen: each test reads what changed.

let database: TestDatabase;
let redis: TestStore;
let replica: KeyServiceReplica;

beforeAll(async () => {
  database = await createTestDatabase({ prefix: 'ks', migrate: (url) => applyMigrations(url) });
  redis = createTestStore();
  const signing = await generateSigningKey();
  replica = await startReplica({
    databaseUrl: database.url,
    store: redis.open(),
    tokenKeys: new TokenKeyRing(signing.key, [signing.verification]),
    // No relay: the outbox keeps what is committed until a test drains it.
    startBackground: false,
  });
});

afterAll(async () => {
  await replica?.close();
  await redis?.cleanup();
  await database?.drop();
});

async function metric(name: string, labels: Record<string, string> = {}): Promise<number> {
  return sampleValue(await replica.service.metrics.registry.metrics(), name, labels) ?? 0;
}

/** How much `metric` grows while `action` runs. */
async function growth(
  name: string,
  labels: Record<string, string>,
  action: () => Promise<unknown>,
): Promise<number> {
  const before = await metric(name, labels);
  await action();
  return (await metric(name, labels)) - before;
}

const SIGN_INS = 'svc_key_service_sign_ins_total';

describe('sign-ins', () => {
  it('counts a verified sign-in', async () => {
    expect(
      await growth(SIGN_INS, { outcome: 'verified' }, () => signIn(replica.client, randomWallet())),
    ).toBe(1);
  });

  it('counts each refusal by its reason, and not as verified', async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const signature = await wallet.signMessage(challenge.message);
    await replica.client.verifySignIn({ message: challenge.message, signature });
    const verifiedBefore = await metric(SIGN_INS, { outcome: 'verified' });

    const reused = () => errorCodeOf(replica.client.verifySignIn({ message: challenge.message, signature }));
    expect(await growth(SIGN_INS, { outcome: 'refused', reason: 'nonce' }, reused)).toBe(1);

    const otherDomain = challenge.message.replace(TEST_SIWE.SIWE_DOMAIN, 'evil.example');
    const mismatched = async () =>
      errorCodeOf(
        replica.client.verifySignIn({
          message: otherDomain,
          signature: await wallet.signMessage(otherDomain),
        }),
      );
    expect(await growth(SIGN_INS, { outcome: 'refused', reason: 'mismatch' }, mismatched)).toBe(1);

    const malformed = () =>
      errorCodeOf(replica.client.verifySignIn({ message: challenge.message, signature: 'nope' }));
    expect(await growth(SIGN_INS, { outcome: 'refused', reason: 'malformed' }, malformed)).toBe(1);
    expect(await metric(SIGN_INS, { outcome: 'verified' })).toBe(verifiedBefore);
  });
});

describe('API keys', () => {
  it('counts each committed change, a repeated revocation once', async () => {
    const CHANGES = 'svc_key_service_api_key_changes_total';
    const signInToken = await replica.tokenFor(randomWallet().address);
    const [minted, revoked, deleted] = [
      await metric(CHANGES, { change: 'minted' }),
      await metric(CHANGES, { change: 'revoked' }),
      await metric(CHANGES, { change: 'deleted' }),
    ];
    const keyId = (await replica.client.mintKey({ signInToken })).apiKey!.id;
    await replica.client.revokeKey({ signInToken, keyId });
    await replica.client.revokeKey({ signInToken, keyId });
    await replica.client.deleteKey({ signInToken, keyId });
    expect(await metric(CHANGES, { change: 'minted' })).toBe(minted + 1);
    expect(await metric(CHANGES, { change: 'revoked' })).toBe(revoked + 1);
    expect(await metric(CHANGES, { change: 'deleted' })).toBe(deleted + 1);
  });
});

describe('spend', () => {
  const FEE = 1_000n;
  const RESERVATIONS = 'svc_key_service_spend_reservations_total';
  const SETTLEMENTS = 'svc_key_service_spend_settlements_total';

  async function cappedKey(cap: bigint): Promise<string> {
    const signInToken = await replica.tokenFor(randomWallet().address);
    return (await replica.client.mintKey({ signInToken, spendCapWei: { decimal: cap.toString() } })).apiKey!
      .id;
  }

  function reserve(keyId: string, ttlMs?: number) {
    return replica.service.domain.ledger.reserve({
      keyId,
      amountWei: FEE,
      requestId: randomUUID(),
      ...(ttlMs ? { ttlMs } : {}),
    });
  }

  it('counts reservations granted and those over the cap', async () => {
    const keyId = await cappedKey(FEE);
    expect(await growth(RESERVATIONS, { outcome: 'reserved' }, () => reserve(keyId))).toBe(1);
    expect(await growth(RESERVATIONS, { outcome: 'over_cap' }, () => reserve(keyId))).toBe(1);
  });

  it('counts settlements by action, settler and the state they left', async () => {
    const keyId = await cappedKey(10n * FEE);
    const reservationIdOf = async () => {
      const reserved = await reserve(keyId);
      if (reserved.outcome !== 'reserved') throw new Error('expected a reservation');
      return reserved.reservation.reservationId;
    };
    const committed = await reservationIdOf();
    const commit = { action: 'commit', settler: 'gateway', state: 'committed' };
    expect(
      await growth(SETTLEMENTS, commit, () =>
        replica.service.domain.ledger.commit(committed, FEE, 'gateway'),
      ),
    ).toBe(1);
    // Releasing a committed reservation changes nothing, and says so.
    const late = { action: 'release', settler: 'event', state: 'committed' };
    expect(
      await growth(SETTLEMENTS, late, () => replica.service.domain.ledger.release(committed, 'event')),
    ).toBe(1);

    const lapsing = await reserve(keyId, 50);
    if (lapsing.outcome !== 'reserved') throw new Error('expected a reservation');
    await sleep(150);
    const swept = { action: 'release', settler: 'sweeper', state: 'released' };
    expect(
      await growth(SETTLEMENTS, swept, () => replica.service.domain.ledger.releaseLapsed(100)),
    ).toBeGreaterThanOrEqual(1);
  });
});

describe('outbox backlog', () => {
  it('shows the unpublished key events and the age of the oldest, until the relay publishes them', async () => {
    const PENDING = 'svc_key_service_outbox_pending_events';
    const AGE = 'svc_key_service_outbox_oldest_pending_age_seconds';
    await replica.service.relay.drain();
    expect(await metric(PENDING)).toBe(0);
    expect(await metric(AGE)).toBe(0);
    const signInToken = await replica.tokenFor(randomWallet().address);
    await replica.client.mintKey({ signInToken });
    await replica.client.mintKey({ signInToken });
    expect(await metric(PENDING)).toBe(2);
    await waitFor(async () => (await metric(AGE)) >= 0.2 || undefined, { what: 'the backlog aging' });
    await replica.service.relay.drain();
    expect(await metric(PENDING)).toBe(0);
    expect(await metric(AGE)).toBe(0);
  });
});
