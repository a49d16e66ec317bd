import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';

/** The key-service's secret settings, as environment variables. */
export interface KeyServiceSecrets {
  readonly SIGNIN_TOKEN_SIGNING_KEY: string;
  readonly SIGNIN_TOKEN_SIGNING_KEY_ID: string;
  readonly API_KEY_PEPPER: string;
}

/**
 * Fresh secrets for the key-service: an ES256 token signing key (PKCS#8 PEM) and a 256-bit pepper. The
 * all-in-one target keeps them under STATE_DIR, so tokens and keys survive a restart; tests use them
 * too. A deployment generates its own and keeps them in its secret store.
 */
export function generateKeyServiceSecrets(): KeyServiceSecrets {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  return {
    SIGNIN_TOKEN_SIGNING_KEY: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    SIGNIN_TOKEN_SIGNING_KEY_ID: `local-${createHash('sha256').update(spki).digest('base64url').slice(0, 16)}`,
    API_KEY_PEPPER: randomBytes(32).toString('base64url'),
  };
}
