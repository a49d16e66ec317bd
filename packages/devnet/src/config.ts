import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { env, type ConfigOf } from '@svc/platform';

/** One file per checkout, whichever directory a command runs in (`.dev/` is gitignored). */
export const DEFAULT_DEVNET_FILE = fileURLToPath(new URL('../../../.dev/devnet.json', import.meta.url));

/** How the devnet is started, by `npm run devnet` and by the runner when RPC_URL is unset. */
export const devnetConfigShape = {
  DEVNET_FILE: env.string({
    doc: 'Devnet description JSON: written when a devnet starts, read by a process given RPC_URL without contract addresses. Relative paths are from the working directory.',
    default: DEFAULT_DEVNET_FILE,
    defaultText: '<checkout>/.dev/devnet.json',
  }),
  DEVNET_PORT: env.port({ doc: 'Port of the devnet started here; 0 picks a free one.', default: 8545 }),
  DEVNET_BLOCK_TIME: env.int({
    doc: 'Seconds between the devnet’s blocks; 0 mines a block per transaction.',
    default: 0,
    min: 0,
    max: 3_600,
  }),
};

export type DevnetConfig = ConfigOf<typeof devnetConfigShape>;

export function resolveDevnetFile(path: string): string {
  return isAbsolute(path) ? path : resolve(process.cwd(), path);
}
