import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '@svc/testkit';
import type { ApiKey } from '@svc/proto/gen/svc/key/v1/api_key_pb';
import { ApiKeyState } from '@svc/proto/gen/svc/key/v1/api_key_pb';
import { applyMigrations } from '../src/db/migrate.js';
import { MAX_UINT256, parseWei } from '../src/money/wei.js';
import { generateSigningKey, TokenKeyRing } from '../src/signin/token-key-ring.js';
import type { RedisStore } from '@svc/platform';
import { errorCodeOf } from './support/errors.js';
import { startReplica, type KeyServiceReplica } from './support/key-service-harness.js';
import { randomWallet } from './support/sign-in.js';
import { createTestStore, type TestStore } from './support/test-store.js';

let database: TestDatabase;
let redis: TestStore;
let replicaA: KeyServiceReplica;
let replicaB: KeyServiceReplica;
let storeA: RedisStore;

beforeAll(async () => {
  database = await createTestDatabase({ prefix: 'ks', migrate: (url) => applyMigrations(url) });
  redis = createTestStore();
  const signing = await generateSigningKey();
  const tokenKeys = new TokenKeyRing(signing.key, [signing.verification]);
  storeA = redis.open();
  // Two replicas over one database and one shared store, each with its own store connection.
  replicaA = await startReplica({
    databaseUrl: database.url,
    store: storeA,
    tokenKeys,
    startBackground: false,
  });
  replicaB = await startReplica({
    databaseUrl: database.url,
    store: redis.open(),
    tokenKeys,
    startBackground: false,
  });
});

afterAll(async () => {
  await replicaA?.close();
  await replicaB?.close();
  await redis?.cleanup();
  await database?.drop();
});

/** A fresh wallet, signed in: its address, and the token its key management is called with. */
async function signedIn(): Promise<{ hex: string; signInToken: string }> {
  const hex = randomWallet().address;
  return { hex, signInToken: await replicaA.tokenFor(hex) };
}

/** The sign-in token of a fresh wallet, for calls that need no second look at the wallet. */
const freshToken = async () => (await signedIn()).signInToken;

function asListed(key: ApiKey) {
  return {
    id: key.id,
    prefix: key.prefix,
    name: key.name,
    spendCapWei: key.spendCapWei?.decimal ?? null,
    spentWei: key.spentWei?.decimal,
    revoked: key.revokedAt !== undefined,
  };
}

describe('mint', () => {
  it('returns the full key once, with 256 bits in base 62, and the listing fields', async () => {
    const owner = await signedIn();
    const minted = await replicaA.client.mintKey({
      signInToken: owner.signInToken,
      name: 'ci',
      spendCapWei: { decimal: '1000' },
    });
    expect(minted.fullKey).toMatch(/^svc_[0-9A-Za-z]{43}$/);
    const key = minted.apiKey!;
    expect(key.prefix).toBe(minted.fullKey.slice(0, 11));
    expect(asListed(key)).toEqual({
      id: key.id,
      prefix: key.prefix,
      name: 'ci',
      spendCapWei: '1000',
      spentWei: '0',
      revoked: false,
    });
    expect(key.limitHits).toMatchObject({ rate: 0n, concurrency: 0n, spendCap: 0n, sessionOpens: 0n });
    expect(Math.abs(Number(key.createdAt!.seconds) * 1000 - Date.now())).toBeLessThan(60_000);
  });

  it('stores only a hash: no column holds the key', async () => {
    const minted = await replicaA.client.mintKey({ signInToken: await freshToken() });
    const rows = await replicaA.db.$queryRaw<Array<{ row: string }>>`
      SELECT row_to_json(k)::text AS row FROM api_keys k WHERE id = ${minted.apiKey!.id}::uuid`;
    expect(rows[0]!.row).not.toContain(minted.fullKey);
    expect(rows[0]!.row).not.toContain(minted.fullKey.slice(11));
  });

  it('takes a name of exactly 64 characters and refuses 65', async () => {
    const owner = await signedIn();
    const name = 'é'.repeat(64);
    expect((await replicaA.client.mintKey({ signInToken: owner.signInToken, name })).apiKey!.name).toBe(name);
    expect(
      await errorCodeOf(replicaA.client.mintKey({ signInToken: owner.signInToken, name: 'x'.repeat(65) })),
    ).toBe('invalid_request');
  });

  it.each([
    ['\u0000'],
    ['a\u0000b'],
    ['\u0007'],
    ['line\nbreak'],
    ['tab\there'],
    ['\u001b[31m'],
    ['\u007f'],
    ['\u0085'],
  ])('refuses the name %p (a control character) with invalid_request', async (name) => {
    expect(await errorCodeOf(replicaA.client.mintKey({ signInToken: await freshToken(), name }))).toBe(
      'invalid_request',
    );
  });

  it('takes names of any script, emoji and joiners included', async () => {
    for (const name of ['clé', '本番キー', '👩\u200d💻', 'a\u00a0b']) {
      expect((await replicaA.client.mintKey({ signInToken: await freshToken(), name })).apiKey!.name).toBe(
        name,
      );
    }
  });

  it.each([
    ['-1'],
    ['1.5'],
    ['1e18'],
    ['abc'],
    [''],
    [(2n ** 256n).toString()],
    // Only ASCII digits, with nothing around them: Unicode spaces and digits are not wei.
    ['\u00a0100'],
    ['100\u2003'],
    ['\u3000'],
    ['\u3000100'],
    ['１００'],
    ['١٠٠'],
    [' 100'],
    ['100 '],
    ['100\n'],
    ['+100'],
  ])('refuses the cap %p with invalid_request', async (decimal) => {
    expect(
      await errorCodeOf(
        replicaA.client.mintKey({ signInToken: await freshToken(), spendCapWei: { decimal } }),
      ),
    ).toBe('invalid_request');
  });

  it('keeps a wallet at 25 active keys when 50 mints race, and a revoked key frees a slot', async () => {
    const owner = await signedIn();
    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, (_, index) =>
        (index % 2 === 0 ? replicaA : replicaB).client.mintKey({
          signInToken: owner.signInToken,
          name: `k${index}`,
        }),
      ),
    );
    const minted = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    const refused = outcomes.filter((outcome) => outcome.status === 'rejected');
    expect(minted).toHaveLength(25);
    expect(refused.map((outcome) => (outcome.reason as { appCode?: string }).appCode)).toEqual(
      Array(25).fill('api_key_limit'),
    );
    const listed = (await replicaA.client.listKeys({ signInToken: owner.signInToken })).apiKeys;
    expect(listed).toHaveLength(25);

    expect(await errorCodeOf(replicaA.client.mintKey({ signInToken: owner.signInToken }))).toBe(
      'api_key_limit',
    );
    await replicaA.client.revokeKey({ signInToken: owner.signInToken, keyId: listed[0]!.id });
    await expect(replicaA.client.mintKey({ signInToken: owner.signInToken })).resolves.toBeDefined();
  });
});

describe('list', () => {
  it('lists the wallet keys newest first, revoked included, never the key', async () => {
    const owner = await signedIn();
    const first = await replicaA.client.mintKey({ signInToken: owner.signInToken, name: 'first' });
    const second = await replicaA.client.mintKey({ signInToken: owner.signInToken, name: 'second' });
    await replicaA.client.revokeKey({ signInToken: owner.signInToken, keyId: first.apiKey!.id });
    const listed = (await replicaA.client.listKeys({ signInToken: owner.signInToken })).apiKeys;
    expect(listed.map((key) => key.name)).toEqual(['second', 'first']);
    expect(listed[1]!.revokedAt).toBeDefined();
    expect(listed[1]!.prefix).toBe(first.apiKey!.prefix);
    expect(
      JSON.stringify(listed, (_, value: unknown) => (typeof value === 'bigint' ? String(value) : value)),
    ).not.toContain(second.fullKey.slice(11));
  });
});

describe('parseWei', () => {
  // What gRPC cannot carry here: its UTF-8 decoder drops a leading byte order mark before any handler runs.
  it.each([['\ufeff100'], ['\u00a0100'], ['100\u2003'], ['１００'], ['\t100']])('refuses %p', (text) => {
    expect(() => parseWei(text, 'spendCapWei')).toThrow(/decimal string/);
  });

  it('takes plain ASCII digits, leading zeros included, up to 2^256 - 1', () => {
    expect(parseWei('0', 'x')).toBe(0n);
    expect(parseWei('007', 'x')).toBe(7n);
    expect(parseWei(MAX_UINT256.toString(), 'x')).toBe(MAX_UINT256);
  });
});

describe('PATCH cap', () => {
  it.each([['\u00a0100'], ['100\u2003'], ['\u3000'], ['１００'], [' 100']])(
    'refuses %p with invalid_request and keeps the cap',
    async (decimal) => {
      const owner = await signedIn();
      const { apiKey } = await replicaA.client.mintKey({
        signInToken: owner.signInToken,
        spendCapWei: { decimal: '7' },
      });
      const update = replicaA.client.updateSpendCap({
        signInToken: owner.signInToken,
        keyId: apiKey!.id,
        spendCap: { case: 'capWei', value: { decimal } },
      });
      expect(await errorCodeOf(update)).toBe('invalid_request');
      const listed = (await replicaA.client.listKeys({ signInToken: owner.signInToken })).apiKeys;
      expect(listed[0]!.spendCapWei?.decimal).toBe('7');
    },
  );
});

describe('state table', () => {
  it('active → PATCH cap (set, change, remove) → revoke → PATCH 409 → delete → gone', async () => {
    const owner = await signedIn();
    const { apiKey } = await replicaA.client.mintKey({ signInToken: owner.signInToken });
    const keyId = apiKey!.id;

    const capped = await replicaA.client.updateSpendCap({
      signInToken: owner.signInToken,
      keyId,
      spendCap: { case: 'capWei', value: { decimal: '5000' } },
    });
    expect(capped.apiKey!.spendCapWei?.decimal).toBe('5000');
    const uncapped = await replicaA.client.updateSpendCap({
      signInToken: owner.signInToken,
      keyId,
      spendCap: { case: 'noCap', value: {} },
    });
    expect(uncapped.apiKey!.spendCapWei).toBeUndefined();
    expect(await errorCodeOf(replicaA.client.updateSpendCap({ signInToken: owner.signInToken, keyId }))).toBe(
      'invalid_request',
    );

    expect(await errorCodeOf(replicaA.client.deleteKey({ signInToken: owner.signInToken, keyId }))).toBe(
      'api_key_active',
    );

    await replicaA.client.revokeKey({ signInToken: owner.signInToken, keyId });
    // Revoking again succeeds and changes nothing.
    await replicaA.client.revokeKey({ signInToken: owner.signInToken, keyId });
    expect(
      await errorCodeOf(
        replicaA.client.updateSpendCap({
          signInToken: owner.signInToken,
          keyId,
          spendCap: { case: 'capWei', value: { decimal: '1' } },
        }),
      ),
    ).toBe('api_key_revoked');
    const [revoked] = (await replicaA.client.listKeys({ signInToken: owner.signInToken })).apiKeys;
    expect(revoked!.spendCapWei).toBeUndefined();
    expect(revoked!.revokedAt).toBeDefined();

    await replicaA.client.deleteKey({ signInToken: owner.signInToken, keyId });
    expect((await replicaA.client.listKeys({ signInToken: owner.signInToken })).apiKeys).toEqual([]);
    expect(await errorCodeOf(replicaA.client.deleteKey({ signInToken: owner.signInToken, keyId }))).toBe(
      'api_key_not_found',
    );
    expect(await errorCodeOf(replicaA.client.revokeKey({ signInToken: owner.signInToken, keyId }))).toBe(
      'api_key_not_found',
    );
    // The tombstone stays for the spend history.
    const tombstones = await replicaA.db.apiKey.count({ where: { id: keyId, deletedAt: { not: null } } });
    expect(tombstones).toBe(1);
  });

  it('answers another wallet exactly as an unknown id, on every route', async () => {
    const owner = await signedIn();
    const intruder = await signedIn();
    const { apiKey } = await replicaA.client.mintKey({ signInToken: owner.signInToken });
    const keyId = apiKey!.id;
    const unknownId = '00000000-0000-4000-8000-000000000000';
    const cap = { case: 'capWei' as const, value: { decimal: '1' } };
    for (const id of [keyId, unknownId, 'not-a-uuid']) {
      expect(
        await errorCodeOf(
          replicaA.client.updateSpendCap({ signInToken: intruder.signInToken, keyId: id, spendCap: cap }),
        ),
      ).toBe('api_key_not_found');
      expect(
        await errorCodeOf(replicaA.client.revokeKey({ signInToken: intruder.signInToken, keyId: id })),
      ).toBe('api_key_not_found');
      expect(
        await errorCodeOf(replicaA.client.deleteKey({ signInToken: intruder.signInToken, keyId: id })),
      ).toBe('api_key_not_found');
    }
    expect((await replicaA.client.listKeys({ signInToken: intruder.signInToken })).apiKeys).toEqual([]);
    // The owner's key is untouched by all of it.
    const [key] = (await replicaA.client.listKeys({ signInToken: owner.signInToken })).apiKeys;
    expect(key!.revokedAt).toBeUndefined();
    expect(key!.spendCapWei).toBeUndefined();
  });
});

describe('resolution', () => {
  it('resolves a key to its id, wallet, state and cap', async () => {
    const owner = await signedIn();
    const minted = await replicaA.client.mintKey({
      signInToken: owner.signInToken,
      spendCapWei: { decimal: '77' },
    });
    const resolved = await replicaA.client.resolveKey({ presentedKey: minted.fullKey });
    expect(resolved).toMatchObject({
      keyId: minted.apiKey!.id,
      prefix: minted.apiKey!.prefix,
      wallet: { hex: owner.hex },
      state: ApiKeyState.ACTIVE,
      spendCapWei: { decimal: '77' },
    });
  });

  it('answers an unknown key, a near miss and a sign-in token with invalid_api_key', async () => {
    const minted = await replicaA.client.mintKey({ signInToken: await freshToken() });
    const nearMiss = minted.fullKey.slice(0, -1) + (minted.fullKey.endsWith('a') ? 'b' : 'a');
    for (const presentedKey of [nearMiss, 'svc_short', 'eyJhbGciOiJFUzI1NiJ9.e30.sig', '']) {
      expect(await errorCodeOf(replicaA.client.resolveKey({ presentedKey }))).toBe('invalid_api_key');
    }
  });

  it('sees a revocation made through another replica at once', async () => {
    const owner = await signedIn();
    const minted = await replicaA.client.mintKey({ signInToken: owner.signInToken });
    expect((await replicaA.client.resolveKey({ presentedKey: minted.fullKey })).state).toBe(
      ApiKeyState.ACTIVE,
    );
    await replicaB.client.revokeKey({ signInToken: owner.signInToken, keyId: minted.apiKey!.id });
    expect(await storeA.revocations.isMarked(minted.apiKey!.id)).toBe(true);
    expect((await replicaA.client.resolveKey({ presentedKey: minted.fullKey })).state).toBe(
      ApiKeyState.REVOKED,
    );
  });

  it('reads the revocation marker on every resolution', async () => {
    const minted = await replicaA.client.mintKey({ signInToken: await freshToken() });
    // A marker alone (as a revocation in flight would leave it) already stops the key.
    await storeA.revocations.mark(minted.apiKey!.id);
    expect((await replicaA.client.resolveKey({ presentedKey: minted.fullKey })).state).toBe(
      ApiKeyState.REVOKED,
    );
  });

  it('writes back a missing marker of a key revoked in the database', async () => {
    const minted = await replicaA.client.mintKey({ signInToken: await freshToken() });
    await replicaA.db.apiKey.update({ where: { id: minted.apiKey!.id }, data: { revokedAt: new Date() } });
    expect((await replicaA.client.resolveKey({ presentedKey: minted.fullKey })).state).toBe(
      ApiKeyState.REVOKED,
    );
    expect(await storeA.revocations.isMarked(minted.apiKey!.id)).toBe(true);
  });

  it('does not resolve a deleted key', async () => {
    const owner = await signedIn();
    const minted = await replicaA.client.mintKey({ signInToken: owner.signInToken });
    await replicaA.client.revokeKey({ signInToken: owner.signInToken, keyId: minted.apiKey!.id });
    await replicaA.client.deleteKey({ signInToken: owner.signInToken, keyId: minted.apiKey!.id });
    expect(await errorCodeOf(replicaA.client.resolveKey({ presentedKey: minted.fullKey }))).toBe(
      'invalid_api_key',
    );
  });
});
