import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { env, type ConfigOf } from '@svc/platform';

/** One file per checkout, whichever directory a command runs in (`.devnet/` is gitignored). */
export const DEFAULT_DEVNET_FILE = fileURLToPath(new URL('../../../.devnet/devnet.json', import.meta.url));

/** How `npm start` and `npm run devnet` find or start their chain. */
export const devnetConfigShape = {
  RPC_URL: env.url({
    doc: 'JSON-RPC endpoint of a chain that is already running (e.g. `npm run devnet`); unset starts a devnet in-process. Needs DEVNET_FILE.',
    protocols: ['http', 'https'],
  }),
  DEVNET_FILE: env.string({
    doc: 'Devnet description JSON: written when the devnet starts here, read when RPC_URL is set. Relative paths are from the working directory.',
    default: DEFAULT_DEVNET_FILE,
    defaultText: '<checkout>/.devnet/devnet.json',
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
