import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_STATE_DIR } from '@svc/runtime/state-dir';
import { STACK_FILE_NAME, type StackFile } from '@svc/server/stack-file-format';

/** What `npm start` writes to `<STATE_DIR>/stack.json`, as far as `svc` reads it. */
export type LocalStack = Omit<StackFile, 'accounts' | 'demoWallet'>;

/** `<STATE_DIR>/stack.json` of a running `npm start`, or undefined when none runs. */
export function readLocalStack(env: NodeJS.ProcessEnv): LocalStack | undefined {
  const path = join(env.STATE_DIR ?? DEFAULT_STATE_DIR, STACK_FILE_NAME);
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as LocalStack;
  } catch {
    return undefined;
  }
}
