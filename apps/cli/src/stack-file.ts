import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StackFile } from '@svc/server/stack-file-format';

/** What `npm start` writes to `<STATE_DIR>/stack.json`, as far as `svc` reads it. */
export type LocalStack = Omit<StackFile, 'accounts' | 'demoWallet'>;

// The repository's own state directory, as the runner defaults it: `svc` lives in the same checkout.
const REPO_STATE_DIR = fileURLToPath(new URL('../../../.dev', import.meta.url));

/** `<STATE_DIR>/stack.json` of a running `npm start`, or undefined when none runs. */
export function readLocalStack(env: NodeJS.ProcessEnv): LocalStack | undefined {
  const path = join(env.STATE_DIR ?? REPO_STATE_DIR, 'stack.json');
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as LocalStack;
  } catch {
    return undefined;
  }
}
