import { createHmac } from 'node:crypto';
import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateKeyServiceSecrets, type KeyServiceSecrets } from '@svc/key-service';

const SECRETS_FILE = 'secrets.json';

/**
 * The all-in-one secrets as settings: the key-service's token signing key with its id and its key pepper,
 * generated on first start and kept under STATE_DIR (owner-only) so sign-in tokens and API keys survive a
 * restart, and the services' shared SERVICE_TOKEN_SECRET, derived from the kept pepper (so a secrets file
 * written before service tokens existed needs no change); `--reset` replaces them. What the environment
 * sets wins: the signing key and its id only together. A deployment never uses this: it sets its own (see
 * docs/configuration.md).
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
    ...(env.SERVICE_TOKEN_SECRET === undefined
      ? { SERVICE_TOKEN_SECRET: derivedSecret(API_KEY_PEPPER, 'svc all-in-one service token secret') }
      : {}),
  };
}

/** A secret of its own for `purpose` from a kept one: HMAC-SHA-256, which reveals nothing of the kept one. */
function derivedSecret(kept: string, purpose: string): string {
  return createHmac('sha256', kept).update(purpose).digest('base64url');
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
