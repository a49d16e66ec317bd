import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create, toBinary } from '@bufbuild/protobuf';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { createTestDatabase, type TestDatabase } from '@svc/testkit';
import { base64url, exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { AddressSchema } from '@svc/proto/gen/svc/common/v1/chain_pb';
import { ListKeysRequestSchema, RevokeKeyRequestSchema } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { applyMigrations } from '../src/db/migrate.js';
import { SIGN_IN_TOKEN_TYPE } from '../src/signin/sign-in-tokens.js';
import { generateSigningKey, TokenKeyRing } from '../src/signin/token-key-ring.js';
import { errorCodeOf } from './support/errors.js';
import { startReplica, type KeyServiceReplica } from './support/key-service-harness.js';
import { randomWallet, signIn } from './support/sign-in.js';
import { createTestStore, type TestStore } from './support/test-store.js';

// The key-management RPCs called directly over gRPC, as anyone who reaches the key-service's port can call
// them (no gateway in front): they act only for the wallet a valid sign-in token proves.

let database: TestDatabase;
let redis: TestStore;
let replica: KeyServiceReplica;
let signing: Awaited<ReturnType<typeof generateSigningKey>>;

beforeAll(async () => {
  database = await createTestDatabase({ prefix: 'ks', migrate: (url) => applyMigrations(url) });
  redis = createTestStore();
  signing = await generateSigningKey();
  replica = await startReplica({
    databaseUrl: database.url,
    store: redis.open(),
    tokenKeys: new TokenKeyRing(signing.key, [signing.verification]),
    startBackground: false,
  });
});

afterAll(async () => {
  await replica?.close();
  await redis?.cleanup();
  await database?.drop();
});

/** A wallet that signed in for real (challenge, personal_sign, verify) and holds one key. */
async function victimWithKey() {
  const wallet = randomWallet();
  const token = await signIn(replica.client, wallet);
  const minted = await replica.client.mintKey({ signInToken: token, name: 'victim' });
  return { address: wallet.address, token, keyId: minted.apiKey!.id, fullKey: minted.fullKey };
}

/** A token for `subject` signed with `key` under `kid`, with the service's claims unless overridden. */
async function craft(
  subject: string,
  key: CryptoKey | Uint8Array,
  overrides: { alg?: string; kid?: string; aud?: string; iss?: string; expSecondsFromNow?: number } = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({})
    .setProtectedHeader({
      alg: overrides.alg ?? 'ES256',
      kid: overrides.kid ?? signing.key.kid,
      typ: SIGN_IN_TOKEN_TYPE,
    })
    .setSubject(subject)
    .setIssuer(overrides.iss ?? replica.config.SIGNIN_TOKEN_ISSUER)
    .setAudience(overrides.aud ?? replica.config.SIGNIN_TOKEN_AUDIENCE)
    .setIssuedAt(now - 60)
    .setExpirationTime(now + (overrides.expSecondsFromNow ?? 600))
    .setJti('attacker')
    .sign(key);
}

/** Every token an attacker without the victim's sign-in could present in the victim's name. */
async function forgedTokensFor(victim: string, attackerToken: string): Promise<Array<[string, string]>> {
  const otherKey = await generateKeyPair('ES256');
  const [header, , signature] = attackerToken.split('.');
  const claims = JSON.parse(
    new TextDecoder().decode(base64url.decode(attackerToken.split('.')[1]!)),
  ) as object;
  const swappedPayload = base64url.encode(JSON.stringify({ ...claims, sub: victim }));
  const publicJwk = await exportJWK(signing.verification.publicKey);
  return [
    ['no token', ''],
    ['another key under the service kid', await craft(victim, otherKey.privateKey)],
    ['an unknown kid', await craft(victim, otherKey.privateKey, { kid: 'attacker-key' })],
    [
      'alg none',
      `${base64url.encode(JSON.stringify({ alg: 'none', kid: signing.key.kid, typ: SIGN_IN_TOKEN_TYPE }))}.${swappedPayload}.`,
    ],
    [
      'HS256 keyed with the public key',
      await craft(victim, new TextEncoder().encode(JSON.stringify(publicJwk)), { alg: 'HS256' }),
    ],
    ["the attacker's own token with the victim as subject", `${header}.${swappedPayload}.${signature}`],
    ['an expired token', await craft(victim, signing.key.privateKey, { expSecondsFromNow: -60 })],
    ['another audience', await craft(victim, signing.key.privateKey, { aud: 'another-api' })],
    ['another issuer', await craft(victim, signing.key.privateKey, { iss: 'someone-else' })],
    ['an API key', `svc_${'A'.repeat(43)}`],
  ];
}

describe('key management called directly over gRPC', () => {
  it('accepts a token crafted with the service key for the victim (the control: the forgeries differ only as named)', async () => {
    const victim = await victimWithKey();
    const token = await craft(victim.address, signing.key.privateKey);
    const listed = (await replica.client.listKeys({ signInToken: token })).apiKeys;
    expect(listed.map((key) => key.id)).toEqual([victim.keyId]);
  });

  it('refuses every forged, expired or foreign token with unauthorized, on every method, changing nothing', async () => {
    const victim = await victimWithKey();
    const attackerToken = await signIn(replica.client, randomWallet());
    const cap = { case: 'capWei' as const, value: { decimal: '1' } };
    for (const [name, signInToken] of await forgedTokensFor(victim.address, attackerToken)) {
      const refusals = {
        list: await errorCodeOf(replica.client.listKeys({ signInToken })),
        mint: await errorCodeOf(replica.client.mintKey({ signInToken, name })),
        cap: await errorCodeOf(
          replica.client.updateSpendCap({ signInToken, keyId: victim.keyId, spendCap: cap }),
        ),
        revoke: await errorCodeOf(replica.client.revokeKey({ signInToken, keyId: victim.keyId })),
        delete: await errorCodeOf(replica.client.deleteKey({ signInToken, keyId: victim.keyId })),
      };
      expect({ name, refusals }).toEqual({
        name,
        refusals: {
          list: 'unauthorized',
          mint: 'unauthorized',
          cap: 'unauthorized',
          revoke: 'unauthorized',
          delete: 'unauthorized',
        },
      });
    }
    // The victim's key is as it was: one key, active, no cap, still resolving; nothing minted for it.
    const listed = (await replica.client.listKeys({ signInToken: victim.token })).apiKeys;
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ id: victim.keyId, name: 'victim' });
    expect(listed[0]!.revokedAt).toBeUndefined();
    expect(listed[0]!.spendCapWei).toBeUndefined();
    expect((await replica.client.resolveKey({ presentedKey: victim.fullKey })).keyId).toBe(victim.keyId);
  });

  it("lets another wallet's valid token act only for that wallet: it cannot list, change, revoke or delete the victim's key", async () => {
    const victim = await victimWithKey();
    const attacker = randomWallet();
    const attackerToken = await signIn(replica.client, attacker);

    expect((await replica.client.listKeys({ signInToken: attackerToken })).apiKeys).toEqual([]);
    const cap = { case: 'capWei' as const, value: { decimal: '1' } };
    expect(
      await errorCodeOf(
        replica.client.updateSpendCap({ signInToken: attackerToken, keyId: victim.keyId, spendCap: cap }),
      ),
    ).toBe('api_key_not_found');
    expect(
      await errorCodeOf(replica.client.revokeKey({ signInToken: attackerToken, keyId: victim.keyId })),
    ).toBe('api_key_not_found');
    expect(
      await errorCodeOf(replica.client.deleteKey({ signInToken: attackerToken, keyId: victim.keyId })),
    ).toBe('api_key_not_found');

    // A mint with the attacker's token mints for the attacker, never for the victim.
    const minted = await replica.client.mintKey({ signInToken: attackerToken, name: 'mine' });
    expect((await replica.client.resolveKey({ presentedKey: minted.fullKey })).wallet?.hex).toBe(
      attacker.address,
    );
    const victimKeys = (await replica.client.listKeys({ signInToken: victim.token })).apiKeys;
    expect(victimKeys.map((key) => key.id)).toEqual([victim.keyId]);
    expect(victimKeys[0]!.revokedAt).toBeUndefined();
  });

  it('ignores a wallet named in the old field 1 of a request: without a token it is unauthorized', async () => {
    const victim = await victimWithKey();
    // What a caller of the previous contract sends: field 1, the wallet, as an Address message.
    const walletField = {
      no: 1,
      wireType: WireType.LengthDelimited,
      data: new BinaryWriter()
        .bytes(toBinary(AddressSchema, create(AddressSchema, { hex: victim.address })))
        .finish(),
    };
    const list = create(ListKeysRequestSchema);
    list.$unknown = [walletField];
    // The field goes on the wire (the client writes unknown fields), so the server does see a wallet.
    expect(toBinary(ListKeysRequestSchema, list)).toEqual(
      new BinaryWriter().tag(1, WireType.LengthDelimited).raw(walletField.data).finish(),
    );
    expect(await errorCodeOf(replica.client.listKeys(list))).toBe('unauthorized');
    const revoke = create(RevokeKeyRequestSchema, { keyId: victim.keyId });
    revoke.$unknown = [walletField];
    expect(await errorCodeOf(replica.client.revokeKey(revoke))).toBe('unauthorized');
    const [key] = (await replica.client.listKeys({ signInToken: victim.token })).apiKeys;
    expect(key!.revokedAt).toBeUndefined();
  });
});
