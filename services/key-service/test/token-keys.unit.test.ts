import { describe, expect, it } from '@jest/globals';
import { generateKeyPairSync } from 'node:crypto';
import { exportJWK, generateKeyPair } from 'jose';
import { SignInTokens } from '../src/signin/sign-in-tokens.js';
import {
  generateSigningKey,
  loadTokenKeyRing,
  TokenKeyError,
  TokenKeyRing,
} from '../src/signin/token-key-ring.js';
import { parseWalletAddress } from '../src/wallet/wallet-address.js';
import { randomWallet } from './support/sign-in.js';

const SETTINGS = { issuer: 'svc-key-service', audience: 'svc-api', ttlMs: 3_600_000 };
const wallet = () => parseWalletAddress(randomWallet().address);

async function privateJwk(alg: 'ES256' | 'EdDSA', kid?: string): Promise<string> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  return JSON.stringify({ ...(await exportJWK(privateKey)), ...(kid ? { kid } : {}) });
}

describe('token key ring', () => {
  it('loads an ES256 signing key from a JWK and keeps its kid', async () => {
    const ring = await loadTokenKeyRing({ signingKey: await privateJwk('ES256', 'k-2026') });
    expect(ring.signing).toMatchObject({ kid: 'k-2026', alg: 'ES256' });
    const tokens = new SignInTokens(ring, SETTINGS);
    const owner = wallet();
    const { token } = await tokens.issue(owner);
    expect((await tokens.authenticate(token)).wallet).toEqual(owner);
  });

  it('loads an Ed25519 PKCS#8 PEM, naming it by its thumbprint unless a kid is configured', async () => {
    const { privateKey } = generateKeyPairSync('ed25519');
    const pem = privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    const byThumbprint = await loadTokenKeyRing({ signingKey: pem });
    expect(byThumbprint.signing.alg).toBe('EdDSA');
    expect(byThumbprint.signing.kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const named = await loadTokenKeyRing({ signingKey: pem, signingKeyId: 'ed-1' });
    expect(named.signing.kid).toBe('ed-1');
    const tokens = new SignInTokens(named, SETTINGS);
    await expect(tokens.authenticate((await tokens.issue(wallet())).token)).resolves.toBeDefined();
  });

  it('accepts tokens of a previous key during a rotation, and refuses them once it is retired', async () => {
    const previous = await generateSigningKey();
    const before = new SignInTokens(new TokenKeyRing(previous.key, [previous.verification]), SETTINGS);
    const { token } = await before.issue(wallet());

    const rotated = await loadTokenKeyRing({
      signingKey: await privateJwk('ES256', 'next'),
      verificationKeys: JSON.stringify({ keys: [previous.verification.jwk] }),
    });
    expect(rotated.jwks().keys.map((key) => key.kid)).toEqual(['next', previous.key.kid]);
    await expect(new SignInTokens(rotated, SETTINGS).authenticate(token)).resolves.toBeDefined();

    const retired = await loadTokenKeyRing({ signingKey: await privateJwk('ES256', 'next') });
    await expect(new SignInTokens(retired, SETTINGS).authenticate(token)).rejects.toMatchObject({
      code: 'unauthorized',
    });
  });

  it('refuses symmetric, RSA and public-only signing keys, and verification keys without kid', async () => {
    await expect(
      loadTokenKeyRing({ signingKey: JSON.stringify({ kty: 'oct', k: 'c2VjcmV0' }) }),
    ).rejects.toThrow(TokenKeyError);
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    await expect(
      loadTokenKeyRing({ signingKey: rsa.privateKey.export({ format: 'pem', type: 'pkcs8' }).toString() }),
    ).rejects.toThrow(TokenKeyError);
    const { publicKey } = await generateKeyPair('ES256', { extractable: true });
    await expect(
      loadTokenKeyRing({ signingKey: JSON.stringify(await exportJWK(publicKey)) }),
    ).rejects.toThrow(TokenKeyError);
    await expect(
      loadTokenKeyRing({ verificationKeys: JSON.stringify({ keys: [await exportJWK(publicKey)] }) }),
    ).rejects.toThrow(TokenKeyError);
  });

  it('refuses a token once it expires (1 hour), with a few seconds of leeway only', async () => {
    const ring = await loadTokenKeyRing({});
    let now = new Date('2030-01-01T00:00:00Z');
    const tokens = new SignInTokens(ring, SETTINGS, () => now);
    const { token, expiresAt } = await tokens.issue(wallet());
    expect(expiresAt.toISOString()).toBe('2030-01-01T01:00:00.000Z');
    now = new Date('2030-01-01T00:59:59Z');
    await expect(tokens.authenticate(token)).resolves.toBeDefined();
    now = new Date('2030-01-01T01:00:30Z');
    await expect(tokens.authenticate(token)).rejects.toMatchObject({ code: 'unauthorized' });
  });
});
