import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '@svc/testkit';
import { SiweMessage } from 'siwe';
import { generateKeyPair, SignJWT, base64url, exportJWK, type CryptoKey } from 'jose';
import { applyMigrations } from '../src/db/migrate.js';
import { generateSigningKey, TokenKeyRing } from '../src/signin/token-key-ring.js';
import { SIGN_IN_TOKEN_TYPE } from '../src/signin/sign-in-tokens.js';
import { errorCodeOf } from './support/errors.js';
import { startReplica, TEST_SIWE, type KeyServiceReplica } from './support/key-service-harness.js';
import {
  compactSignature,
  eip6492Signature,
  multiOwnerSignature,
  randomWallet,
  refusalOf,
  signIn,
} from './support/sign-in.js';
import { createTestStore, type TestStore } from './support/test-store.js';

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

/** The challenge's message with some fields changed, as an attacker or a foreign site would present it. */
function altered(message: string, changes: Partial<SiweMessage>): string {
  const parsed = new SiweMessage(message);
  return new SiweMessage({ ...parsed, ...changes }).prepareMessage();
}

describe('challenge', () => {
  it('issues an EIP-4361 message for the configured domain, URI and chain, naming the checksummed address', async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({
      address: { hex: wallet.address.toLowerCase() },
    });
    const message = new SiweMessage(challenge.message);
    expect(message.domain).toBe(TEST_SIWE.SIWE_DOMAIN);
    expect(message.uri).toBe(TEST_SIWE.SIWE_URI);
    expect(message.chainId).toBe(31337);
    expect(message.version).toBe('1');
    expect(message.address).toBe(wallet.address);
    expect(message.nonce).toBe(challenge.nonce);
    expect(message.statement).toBe('Sign in to manage API keys');
    expect(challenge.nonce).toMatch(/^[0-9a-f]{32}$/);
    const expiresInMs = Number(challenge.expiresAt!.seconds) * 1000 - Date.now();
    expect(expiresInMs).toBeGreaterThan(4 * 60_000);
    expect(expiresInMs).toBeLessThanOrEqual(5 * 60_000);
  });

  it.each([
    ['not hex', '0xZZ0000000000000000000000000000000000000000'],
    ['too short', '0x1234'],
    ['empty', ''],
    ['a bad EIP-55 checksum', '0x52908400098527886E0F7030069857D2E4169EE7'.replace('E7', 'e7')],
  ])('refuses an address that is %s with invalid_request', async (_, hex) => {
    expect(await errorCodeOf(replica.client.createChallenge({ address: { hex } }))).toBe('invalid_request');
  });
});

describe('verify', () => {
  it('turns a signed challenge into a one-hour token for the signer', async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const signature = await wallet.signMessage(challenge.message);
    const result = await replica.client.verifySignIn({ message: challenge.message, signature });
    expect(result.address?.hex).toBe(wallet.address);
    const lifetimeMs = Number(result.expiresAt!.seconds) * 1000 - Date.now();
    expect(lifetimeMs).toBeGreaterThan(59 * 60_000);
    expect(lifetimeMs).toBeLessThanOrEqual(60 * 60_000);
    const identity = await replica.client.authenticateToken({ token: result.token });
    expect(identity.wallet?.hex).toBe(wallet.address);
  });

  it('refuses a replayed nonce', async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const signature = await wallet.signMessage(challenge.message);
    await replica.client.verifySignIn({ message: challenge.message, signature });
    expect(await errorCodeOf(replica.client.verifySignIn({ message: challenge.message, signature }))).toBe(
      'unauthorized',
    );
  });

  it('gives exactly one token to five parallel verifications of one signed message', async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const signature = await wallet.signMessage(challenge.message);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 5 }, () => replica.client.verifySignIn({ message: challenge.message, signature })),
    );
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
  });

  it('refuses a nonce issued for another address, and leaves it usable by its owner', async () => {
    const owner = randomWallet();
    const attacker = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: owner.address } });
    const stolen = altered(challenge.message, { address: attacker.address });
    const code = await errorCodeOf(
      replica.client.verifySignIn({ message: stolen, signature: await attacker.signMessage(stolen) }),
    );
    expect(code).toBe('unauthorized');
    const result = await replica.client.verifySignIn({
      message: challenge.message,
      signature: await owner.signMessage(challenge.message),
    });
    expect(result.address?.hex).toBe(owner.address);
  });

  it.each([
    ['another domain', { domain: 'evil.example.test' }],
    ['another URI', { uri: 'https://evil.example.test/sign-in' }],
    ['another chain id', { chainId: 1 }],
    ['an expired message', { expirationTime: new Date(Date.now() - 10 * 60_000).toISOString() }],
    ['a message not valid yet', { notBefore: new Date(Date.now() + 10 * 60_000).toISOString() }],
    ['a message issued in the future', { issuedAt: new Date(Date.now() + 10 * 60_000).toISOString() }],
  ])('refuses %s without spending the nonce', async (_, changes) => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const forged = altered(challenge.message, changes as Partial<SiweMessage>);
    expect(forged).not.toBe(challenge.message);
    const code = await errorCodeOf(
      replica.client.verifySignIn({ message: forged, signature: await wallet.signMessage(forged) }),
    );
    expect(code).toBe('unauthorized');
    // The genuine message still signs in: a refused message never spends the nonce.
    await replica.client.verifySignIn({
      message: challenge.message,
      signature: await wallet.signMessage(challenge.message),
    });
  });

  it('refuses the issued message signed by another wallet, without spending the nonce', async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const code = await errorCodeOf(
      replica.client.verifySignIn({
        message: challenge.message,
        signature: await randomWallet().signMessage(challenge.message),
      }),
    );
    expect(code).toBe('unauthorized');
    // Whoever learned the issued message cannot burn it: only its address's signature spends the nonce.
    const result = await replica.client.verifySignIn({
      message: challenge.message,
      signature: await wallet.signMessage(challenge.message),
    });
    expect(result.address?.hex).toBe(wallet.address);
  });

  it('refuses a message changed after signing', async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const signature = await wallet.signMessage(challenge.message);
    const changed = altered(challenge.message, { statement: 'Sign in to manage API keys, and more' });
    expect(await errorCodeOf(replica.client.verifySignIn({ message: changed, signature }))).toBe(
      'unauthorized',
    );
  });

  it.each([
    ['not hex', '0xzz'],
    ['an odd number of hex digits', '0x123'],
    ['missing its 0x', 'ab'.repeat(65)],
    ['empty', ''],
  ])('answers a signature that is %s with invalid_request', async (_, signature) => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    expect(await errorCodeOf(replica.client.verifySignIn({ message: challenge.message, signature }))).toBe(
      'invalid_request',
    );
  });

  it('answers a non-SIWE message with unauthorized', async () => {
    const wallet = randomWallet();
    const signature = await wallet.signMessage('hello');
    expect(await errorCodeOf(replica.client.verifySignIn({ message: 'hello', signature }))).toBe(
      'unauthorized',
    );
  });
});

describe('verify: the signed message must be exactly the issued one', () => {
  // Each variant is signed by the challenged wallet, names the challenge's nonce and passes every field and
  // time check: only the binding of the nonce to the issued text refuses it.
  it.each([
    ['another statement', { statement: 'Sign in to manage API keys and approve every transfer' }],
    [
      'extra Resources',
      {
        resources: [
          'https://keys.example.test/admin',
          'ipfs://bafybeiemxf5abjwjbikoz4mc3a3dla6ual3jsgpdr4cjr3oz3evfyavhwq',
        ],
      },
    ],
    ['no Expiration Time', { expirationTime: undefined }],
    ['another Issued At', { issuedAt: new Date(Date.now() - 30_000).toISOString() }],
    ['a Not Before', { notBefore: new Date(Date.now() - 30_000).toISOString() }],
    ['a Request ID', { requestId: 'request-1' }],
  ])(
    'refuses the issued message with %s, signed by the right wallet, and leaves the nonce to the issued message',
    async (_, changes) => {
      const wallet = randomWallet();
      const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
      const variant = altered(challenge.message, changes as Partial<SiweMessage>);
      expect(variant).not.toBe(challenge.message);
      expect(new SiweMessage(variant).nonce).toBe(challenge.nonce);
      const refusal = await refusalOf(
        replica.client.verifySignIn({ message: variant, signature: await wallet.signMessage(variant) }),
      );
      expect(refusal.code).toBe('unauthorized');
      expect(refusal.message).toMatch(/not the message issued with its nonce/);
      const result = await replica.client.verifySignIn({
        message: challenge.message,
        signature: await wallet.signMessage(challenge.message),
      });
      expect(result.address?.hex).toBe(wallet.address);
    },
  );

  it('refuses the issued message with CRLF line endings (compared byte for byte)', async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const crlf = challenge.message.replace(/\n/g, '\r\n');
    expect(
      await errorCodeOf(
        replica.client.verifySignIn({ message: crlf, signature: await wallet.signMessage(crlf) }),
      ),
    ).toBe('unauthorized');
  });

  it('gives exactly one token, to the issued message, when variants and the issued message race for a nonce', async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const variant = altered(challenge.message, { resources: ['https://keys.example.test/admin'] });
    const [genuineSignature, variantSignature] = await Promise.all([
      wallet.signMessage(challenge.message),
      wallet.signMessage(variant),
    ]);
    const attempts = Array.from({ length: 10 }, (_, index) =>
      index % 2 === 0
        ? { message: variant, signature: variantSignature }
        : { message: challenge.message, signature: genuineSignature },
    );
    const outcomes = await Promise.allSettled(
      attempts.map((attempt) => replica.client.verifySignIn(attempt)),
    );
    const winners = attempts.filter((_, index) => outcomes[index]!.status === 'fulfilled');
    expect(winners).toEqual([{ message: challenge.message, signature: genuineSignature }]);
  });
});

describe('verify: smart-contract wallets', () => {
  const contractWalletRefusal =
    /smart-contract wallets \(EIP-1271\/EIP-6492\) cannot sign in yet.*externally owned account/;

  it('refuses an EIP-6492 signature of a counterfactual account with unauthorized, naming contract wallets', async () => {
    const owner = randomWallet();
    const account = randomWallet().address; // the account the factory would deploy
    const challenge = await replica.client.createChallenge({ address: { hex: account } });
    const signature = await eip6492Signature(owner, challenge.message);
    expect(signature.endsWith('6492'.repeat(16))).toBe(true);
    const refusal = await refusalOf(replica.client.verifySignIn({ message: challenge.message, signature }));
    expect(refusal).toEqual({ code: 'unauthorized', message: expect.stringMatching(contractWalletRefusal) });
    expect(refusal.message).toMatch(/EIP-6492/);
  });

  it.each([
    ['a multi-owner (Safe style) signature of 130 bytes', 2],
    ['a multi-owner signature of 195 bytes', 3],
  ])('refuses %s with unauthorized, naming contract wallets', async (_, owners) => {
    const wallets = Array.from({ length: owners }, () => randomWallet());
    const safe = randomWallet().address;
    const challenge = await replica.client.createChallenge({ address: { hex: safe } });
    const signature = await multiOwnerSignature(wallets, challenge.message);
    const refusal = await refusalOf(replica.client.verifySignIn({ message: challenge.message, signature }));
    expect(refusal).toEqual({ code: 'unauthorized', message: expect.stringMatching(contractWalletRefusal) });
  });

  it('refuses a hex signature of another length (an EIP-1271 blob) with unauthorized, naming contract wallets', async () => {
    const challenge = await replica.client.createChallenge({ address: { hex: randomWallet().address } });
    const refusal = await refusalOf(
      replica.client.verifySignIn({ message: challenge.message, signature: '0x1234' }),
    );
    expect(refusal).toEqual({ code: 'unauthorized', message: expect.stringMatching(contractWalletRefusal) });
  });

  it("refuses an owner's 65-byte signature for a contract wallet's address, saying contract wallets are not supported", async () => {
    const owner = randomWallet();
    const contractWallet = randomWallet().address;
    const challenge = await replica.client.createChallenge({ address: { hex: contractWallet } });
    const refusal = await refusalOf(
      replica.client.verifySignIn({
        message: challenge.message,
        signature: await owner.signMessage(challenge.message),
      }),
    );
    expect(refusal.code).toBe('unauthorized');
    expect(refusal.message).toMatch(/does not recover to the message's address/);
    expect(refusal.message).toMatch(contractWalletRefusal);
  });

  it('accepts the EIP-2098 compact (64-byte) form of the right signature', async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const signature = compactSignature(await wallet.signMessage(challenge.message));
    expect(signature).toMatch(/^0x[0-9a-f]{128}$/);
    const result = await replica.client.verifySignIn({ message: challenge.message, signature });
    expect(result.address?.hex).toBe(wallet.address);
  });

  it("refuses the compact form of another wallet's signature", async () => {
    const wallet = randomWallet();
    const challenge = await replica.client.createChallenge({ address: { hex: wallet.address } });
    const signature = compactSignature(await randomWallet().signMessage(challenge.message));
    expect(await errorCodeOf(replica.client.verifySignIn({ message: challenge.message, signature }))).toBe(
      'unauthorized',
    );
  });
});

describe('sign-in token', () => {
  const claims = { sub: '', iss: 'svc-key-service', aud: 'svc-api' };

  async function validToken(): Promise<string> {
    return signIn(replica.client, randomWallet());
  }

  async function craft(
    key: CryptoKey,
    kid: string,
    overrides: { aud?: string; iss?: string; expSecondsFromNow?: number; typ?: string } = {},
  ): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid, typ: overrides.typ ?? SIGN_IN_TOKEN_TYPE })
      .setSubject(randomWallet().address)
      .setIssuer(overrides.iss ?? claims.iss)
      .setAudience(overrides.aud ?? claims.aud)
      .setIssuedAt(now - 60)
      .setExpirationTime(now + (overrides.expSecondsFromNow ?? 600))
      .setJti('test')
      .sign(key);
  }

  async function rejects(token: string): Promise<void> {
    expect(await errorCodeOf(replica.client.authenticateToken({ token }))).toBe('unauthorized');
  }

  it('accepts a token crafted with the service key and the right claims (the control for the attacks below)', async () => {
    const token = await craft(signing.key.privateKey, signing.key.kid);
    await expect(replica.client.authenticateToken({ token })).resolves.toBeDefined();
  });

  it('refuses a token signed with another key under the same kid', async () => {
    const other = await generateKeyPair('ES256');
    await rejects(await craft(other.privateKey, signing.key.kid));
  });

  it('refuses a token with an unknown kid', async () => {
    await rejects(await craft(signing.key.privateKey, 'some-other-key'));
  });

  it('refuses alg none', async () => {
    const [, payload] = (await validToken()).split('.');
    const header = base64url.encode(
      JSON.stringify({ alg: 'none', kid: signing.key.kid, typ: SIGN_IN_TOKEN_TYPE }),
    );
    await rejects(`${header}.${payload}.`);
  });

  it('refuses an HS256 token keyed with the public key', async () => {
    const publicJwk = await exportJWK(signing.verification.publicKey);
    const secret = new TextEncoder().encode(JSON.stringify(publicJwk));
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', kid: signing.key.kid, typ: SIGN_IN_TOKEN_TYPE })
      .setSubject(randomWallet().address)
      .setIssuer(claims.iss)
      .setAudience(claims.aud)
      .setIssuedAt()
      .setExpirationTime('10m')
      .setJti('test')
      .sign(secret);
    await rejects(token);
  });

  it('refuses a token of another audience, another issuer or another type', async () => {
    await rejects(await craft(signing.key.privateKey, signing.key.kid, { aud: 'another-api' }));
    await rejects(await craft(signing.key.privateKey, signing.key.kid, { iss: 'someone-else' }));
    await rejects(await craft(signing.key.privateKey, signing.key.kid, { typ: 'JWT' }));
  });

  it('refuses an expired token', async () => {
    await rejects(await craft(signing.key.privateKey, signing.key.kid, { expSecondsFromNow: -60 }));
  });

  it('refuses an API key presented as a token', async () => {
    await rejects(`svc_${'a'.repeat(43)}`);
  });

  it('publishes the verification keys as a JWKS without private parts', async () => {
    const { jwksJson } = await replica.client.getJwks({});
    const jwks = JSON.parse(jwksJson) as { keys: Array<Record<string, unknown>> };
    expect(jwks.keys).toEqual([expect.objectContaining({ kid: signing.key.kid, alg: 'ES256', kty: 'EC' })]);
    expect(jwks.keys[0]).not.toHaveProperty('d');
  });
});
