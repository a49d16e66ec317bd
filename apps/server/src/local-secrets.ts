import { createHmac, createPrivateKey } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateKeyServiceSecrets, type KeyServiceSecrets } from '@svc/key-service';
import { callerKeysSetting, publicKeyText } from '@svc/platform';

const SECRETS_FILE = 'secrets.json';

/**
 * The all-in-one secrets as settings: the key-service's token signing key with its id and its key pepper,
 * generated on first start and kept under STATE_DIR (owner-only) so sign-in tokens and API keys survive a
 * restart, and SERVICE_TOKEN_CALLER_KEYS, the public keys of the calling services' key pairs, which are
 * derived from the kept pepper (so a secrets file written before service tokens existed needs no change;
 * each service's private key is its unit's, `localServiceTokenKeys`); `--reset` replaces them. What the
 * environment sets wins: the signing key and its id only together. A deployment never uses this: it sets
 * its own (see docs/configuration.md).
 */
export function localSecretSettings(
  env: Readonly<Record<string, string | undefined>>,
  stateDir: string,
): Record<string, string> {
  const { SIGNIN_TOKEN_SIGNING_KEY, SIGNIN_TOKEN_SIGNING_KEY_ID, API_KEY_PEPPER } = localSecrets(stateDir);
  return {
    ...(env.SIGNIN_TOKEN_SIGNING_KEY === undefined
      ? { SIGNIN_TOKEN_SIGNING_KEY, SIGNIN_TOKEN_SIGNING_KEY_ID }
      : {}),
    ...(env.API_KEY_PEPPER === undefined ? { API_KEY_PEPPER } : {}),
    ...(env.SERVICE_TOKEN_CALLER_KEYS === undefined
      ? {
          SERVICE_TOKEN_CALLER_KEYS: callerKeysSetting(
            Object.fromEntries(
              Object.entries(serviceTokenKeysOf(API_KEY_PEPPER)).map(([caller, keys]) => [
                caller,
                keys.publicKey,
              ]),
            ),
          ),
        }
      : {}),
  };
}

/** The services of the all-in-one target that call others, each with a key pair of its own. */
export type LocalCaller = 'gateway' | 'job-orchestrator';

/**
 * The service token key pair of each calling service of the all-in-one target (SERVICE_TOKEN_PRIVATE_KEY
 * is each one's own; the public keys are SERVICE_TOKEN_CALLER_KEYS), derived from the kept pepper: the
 * same on every start, new after `--reset`.
 */
export function localServiceTokenKeys(
  stateDir: string,
): Record<LocalCaller, { readonly privateKey: string; readonly publicKey: string }> {
  return serviceTokenKeysOf(localSecrets(stateDir).API_KEY_PEPPER);
}

/** DER of a PKCS#8 Ed25519 private key up to its 32-byte seed (RFC 8410). */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

function serviceTokenKeysOf(
  pepper: string,
): Record<LocalCaller, { readonly privateKey: string; readonly publicKey: string }> {
  const pair = (caller: LocalCaller) => {
    const seed = createHmac('sha256', pepper).update(`svc all-in-one service token key: ${caller}`).digest();
    const der = Buffer.concat([ED25519_PKCS8_PREFIX, seed]);
    const key = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
    return { privateKey: der.toString('base64'), publicKey: publicKeyText(key) };
  };
  return { gateway: pair('gateway'), 'job-orchestrator': pair('job-orchestrator') };
}

/** The kept secrets, created at once if there are none (atomically: a reader never sees half a file). */
function localSecrets(stateDir: string): KeyServiceSecrets {
  const path = join(stateDir, SECRETS_FILE);
  const kept = readSecrets(path);
  if (kept !== undefined) return kept;
  mkdirSync(stateDir, { recursive: true });
  const draft = `${path}.${process.pid}.tmp`;
  writeFileSync(draft, `${JSON.stringify(generateKeyServiceSecrets(), null, 2)}\n`, { mode: 0o600 });
  try {
    linkSync(draft, path);
  } catch (error) {
    // Another process started at the same moment and created it first: use its secrets.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  } finally {
    rmSync(draft, { force: true });
  }
  return readSecrets(path) as KeyServiceSecrets;
}

function readSecrets(path: string): KeyServiceSecrets | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  const refused = new Error(`${path} is not a secrets file this server wrote; remove it or run with --reset`);
  let secrets: Partial<Record<keyof KeyServiceSecrets, unknown>>;
  try {
    secrets = JSON.parse(text) as typeof secrets;
  } catch {
    throw refused;
  }
  const fields: Array<keyof KeyServiceSecrets> = [
    'SIGNIN_TOKEN_SIGNING_KEY',
    'SIGNIN_TOKEN_SIGNING_KEY_ID',
    'API_KEY_PEPPER',
  ];
  if (secrets === null || fields.some((field) => typeof secrets[field] !== 'string' || secrets[field] === ''))
    throw refused;
  return secrets as KeyServiceSecrets;
}
