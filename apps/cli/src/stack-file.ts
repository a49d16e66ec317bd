import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** What `npm start` writes to `<STATE_DIR>/stack.json` (apps/server/src/stack-file.ts), as `svc` reads it. */
export interface LocalStack {
  readonly gatewayUrl: string;
  readonly rpcUrl: string;
  readonly chainId: number;
  readonly contracts: { readonly jobRegistry: string; readonly workerRegistry: string };
  readonly delegate: string | null;
  readonly facilitator: string | null;
  readonly models: readonly string[];
}

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
