import { createPrivateKey } from 'node:crypto';
import {
  calculateJwkThumbprint,
  exportJWK,
  generateKeyPair,
  importJWK,
  importPKCS8,
  type CryptoKey,
  type JSONWebKeySet,
  type JWK,
} from 'jose';

/** The asymmetric algorithms sign-in tokens may use; everything else (HS*, RS*, `none`) is refused. */
export const TOKEN_ALGORITHMS = ['ES256', 'EdDSA'] as const;
export type TokenAlgorithm = (typeof TOKEN_ALGORITHMS)[number];

export interface TokenSigningKey {
  readonly kid: string;
  readonly alg: TokenAlgorithm;
  readonly privateKey: CryptoKey;
}

export interface TokenVerificationKey {
  readonly kid: string;
  readonly alg: TokenAlgorithm;
  readonly publicKey: CryptoKey;
  /** The public JWK as published in the JWKS. */
  readonly jwk: JWK;
}

/**
 * The keys of sign-in tokens: one current key signs, and its public half plus the public halves of older
 * keys verify, so a rotation publishes the new key first and retires the old one after the last token
 * it signed has expired.
 */
export class TokenKeyRing {
  readonly #verification: ReadonlyMap<string, TokenVerificationKey>;

  constructor(
    readonly signing: TokenSigningKey,
    verification: readonly TokenVerificationKey[],
  ) {
    const byKid = new Map<string, TokenVerificationKey>();
    for (const key of verification) {
      if (byKid.has(key.kid)) throw new TokenKeyError(`two verification keys share kid "${key.kid}"`);
      byKid.set(key.kid, key);
    }
    if (!byKid.has(signing.kid)) throw new TokenKeyError('the signing key has no verification key');
    this.#verification = byKid;
  }

  verificationKey(kid: string | undefined): TokenVerificationKey | undefined {
    return kid === undefined ? undefined : this.#verification.get(kid);
  }

  /** The public JWK Set (RFC 7517) for verifiers elsewhere. */
  jwks(): JSONWebKeySet {
    return { keys: [...this.#verification.values()].map((key) => key.jwk) };
  }
}

export class TokenKeyError extends Error {
  override readonly name = 'TokenKeyError';
}

export interface TokenKeySettings {
  /** Private key as a JWK (JSON) or PKCS#8 PEM; undefined generates one. */
  readonly signingKey?: string;
  /** `kid` for a PEM signing key; defaults to the key's RFC 7638 thumbprint. */
  readonly signingKeyId?: string;
  /** JWK Set (JSON) of older public keys still accepted. */
  readonly verificationKeys?: string;
}

/** Builds the key ring from configuration, generating an ES256 key when none is configured. */
export async function loadTokenKeyRing(settings: TokenKeySettings): Promise<TokenKeyRing> {
  const signing = settings.signingKey
    ? await importSigningKey(settings.signingKey, settings.signingKeyId)
    : await generateSigningKey();
  const older = settings.verificationKeys ? await importVerificationKeys(settings.verificationKeys) : [];
  return new TokenKeyRing(signing.key, [
    signing.verification,
    ...older.filter((key) => key.kid !== signing.key.kid),
  ]);
}

interface SigningPair {
  readonly key: TokenSigningKey;
  readonly verification: TokenVerificationKey;
}

export async function generateSigningKey(alg: TokenAlgorithm = 'ES256'): Promise<SigningPair> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const publicJwk = await exportJWK(publicKey);
  const kid = await calculateJwkThumbprint(publicJwk);
  return {
    key: { kid, alg, privateKey },
    verification: { kid, alg, publicKey, jwk: publishedJwk(publicJwk, kid, alg) },
  };
}

async function importSigningKey(text: string, configuredKid: string | undefined): Promise<SigningPair> {
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    const jwk = parseJson(trimmed, 'the signing key') as JWK;
    if (typeof jwk.d !== 'string') throw new TokenKeyError('the signing JWK has no private part ("d")');
    const alg = algorithmOf(jwk);
    const publicJwk = publicPart(jwk);
    const kid = jwk.kid ?? configuredKid ?? (await calculateJwkThumbprint(publicJwk));
    const privateKey = (await importJWK(jwk, alg)) as CryptoKey;
    const publicKey = (await importJWK(publicJwk, alg)) as CryptoKey;
    return {
      key: { kid, alg, privateKey },
      verification: { kid, alg, publicKey, jwk: publishedJwk(publicJwk, kid, alg) },
    };
  }
  if (!trimmed.includes('-----BEGIN PRIVATE KEY-----')) {
    throw new TokenKeyError('the signing key must be a JWK (JSON) or a PKCS#8 PEM ("BEGIN PRIVATE KEY")');
  }
  const nodeKey = createPrivateKey(trimmed);
  const alg = algorithmOf(nodeKey.export({ format: 'jwk' }) as JWK);
  const privateKey = await importPKCS8(trimmed, alg, { extractable: true });
  const publicJwk = publicPart((await exportJWK(privateKey)) as JWK);
  const kid = configuredKid ?? (await calculateJwkThumbprint(publicJwk));
  const publicKey = (await importJWK(publicJwk, alg)) as CryptoKey;
  return {
    key: { kid, alg, privateKey },
    verification: { kid, alg, publicKey, jwk: publishedJwk(publicJwk, kid, alg) },
  };
}

async function importVerificationKeys(text: string): Promise<TokenVerificationKey[]> {
  const set = parseJson(text, 'the verification key set') as Partial<JSONWebKeySet>;
  if (!Array.isArray(set.keys)) throw new TokenKeyError('the verification key set has no "keys" array');
  return Promise.all(
    set.keys.map(async (jwk) => {
      if (typeof jwk.kid !== 'string' || jwk.kid === '')
        throw new TokenKeyError('every verification key needs a "kid"');
      const alg = algorithmOf(jwk);
      const publicJwk = publicPart(jwk);
      const publicKey = (await importJWK(publicJwk, alg)) as CryptoKey;
      return { kid: jwk.kid, alg, publicKey, jwk: publishedJwk(publicJwk, jwk.kid, alg) };
    }),
  );
}

function algorithmOf(jwk: JWK): TokenAlgorithm {
  if (jwk.kty === 'EC' && jwk.crv === 'P-256' && (jwk.alg === undefined || jwk.alg === 'ES256'))
    return 'ES256';
  if (
    jwk.kty === 'OKP' &&
    jwk.crv === 'Ed25519' &&
    (jwk.alg === undefined || jwk.alg === 'EdDSA' || jwk.alg === 'Ed25519')
  )
    return 'EdDSA';
  throw new TokenKeyError(
    `unsupported token key (kty ${String(jwk.kty)}, crv ${String(jwk.crv)}, alg ${String(jwk.alg)}): use EC P-256 (ES256) or Ed25519 (EdDSA)`,
  );
}

/** The public members of an EC or OKP JWK; everything private (`d`) or incidental is dropped. */
function publicPart(jwk: JWK): JWK {
  return jwk.kty === 'EC'
    ? { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }
    : { kty: jwk.kty, crv: jwk.crv, x: jwk.x };
}

function publishedJwk(publicJwk: JWK, kid: string, alg: TokenAlgorithm): JWK {
  return { ...publicPart(publicJwk), kid, alg, use: 'sig' };
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new TokenKeyError(`${what} is not valid JSON`);
  }
}
