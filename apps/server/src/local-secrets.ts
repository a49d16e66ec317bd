import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { generateKeyServiceSecrets, type KeyServiceSecrets } from '@svc/key-service';

const SECRETS_FILE = 'secrets.json';

/**
 * The all-in-one key-service's secrets (token signing key, key pepper), generated on first start and kept
 * under STATE_DIR (owner-only), so sign-in tokens and API keys survive a restart; `--reset` replaces them.
 * A deployment never uses this: it must set its own (see docs/configuration.md).
 */
export function localSecrets(stateDir: string): KeyServiceSecrets {
  const path = join(stateDir, SECRETS_FILE);
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as KeyServiceSecrets;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  mkdirSync(stateDir, { recursive: true });
  const secrets = generateKeyServiceSecrets();
  try {
    writeFileSync(path, `${JSON.stringify(secrets, null, 2)}\n`, { flag: 'wx', mode: 0o600 });
    return secrets;
  } catch (error) {
    // Another process started at the same moment and wrote first: use its secrets.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return JSON.parse(readFileSync(path, 'utf8')) as KeyServiceSecrets;
  }
}
