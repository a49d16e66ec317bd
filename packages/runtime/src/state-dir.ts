import { fileURLToPath } from 'node:url';

/**
 * Local state of a checkout (embedded database, devnet chain, worker data, `npm start`'s logs), whichever
 * directory runs it: `STATE_DIR`'s default. A module of its own so that light readers (the launcher, the
 * `svc` command) find it without loading the runner.
 */
export const DEFAULT_STATE_DIR = fileURLToPath(new URL('../../../.dev', import.meta.url));
