import type { Logger } from '@svc/platform';
import type { DevnetConfig } from './config.js';
import { resolveDevnetFile } from './config.js';
import type { DevnetDescription } from './description.js';
import { describeExternalChain } from './external-chain.js';
import { startDevnet } from './start-devnet.js';
import { loggableSummary } from './summary.js';

export interface LocalChain {
  description: DevnetDescription;
  /** Stops the devnet when it was started here; a chain given by RPC_URL is left running. */
  close(): Promise<void>;
}

/**
 * The chain of the all-in-one mode: with RPC_URL, the chain running there as its description file
 * (DEVNET_FILE) describes it; without, a devnet started in this process.
 */
export async function openLocalChain(config: DevnetConfig, logger: Logger): Promise<LocalChain> {
  const descriptionPath = resolveDevnetFile(config.DEVNET_FILE);
  if (config.RPC_URL) {
    const description = await describeExternalChain(config.RPC_URL, descriptionPath);
    logger.info({ devnet: loggableSummary(description, descriptionPath) }, 'using the chain at RPC_URL');
    return { description, close: async () => {} };
  }
  const devnet = await startDevnet({
    port: config.DEVNET_PORT,
    blockTimeSeconds: config.DEVNET_BLOCK_TIME || undefined,
    descriptionPath,
  });
  logger.info({ devnet: loggableSummary(devnet.description, descriptionPath) }, 'devnet up');
  return { description: devnet.description, close: () => devnet.stop() };
}
