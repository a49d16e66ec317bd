import { join } from 'node:path';
import {
  describeExternalChain,
  jsonRpc,
  loggableSummary,
  resolveDevnetFile,
  startDevnet,
  type DevnetDescription,
} from '@svc/devnet';
import type { Logger } from '@svc/platform';
import { getAddress } from 'ethers';

/** The chain every service of a process talks to, and where its contracts are. */
export interface ChainConnection {
  readonly rpcUrl: string;
  readonly chainId: number;
  /** null: a block per transaction (a devnet's automine) or unknown. */
  readonly blockTimeSeconds: number | null;
  readonly contracts: {
    readonly jobRegistry: string;
    readonly workerRegistry: string;
    /** First block of the deployment, where log scans start; 0 when not known. */
    readonly deploymentBlock: number;
  };
  /** The devnet's description (role accounts with their dev keys) when the chain is a devnet. */
  readonly devnet: DevnetDescription | null;
}

export interface ChainSettings {
  readonly RPC_URL: string | undefined;
  readonly CHAIN_ID: number | undefined;
  readonly JOB_REGISTRY_ADDRESS: string | undefined;
  readonly WORKER_REGISTRY_ADDRESS: string | undefined;
  /** Unset: `<stateDir>/devnet.json`. */
  readonly DEVNET_FILE: string | undefined;
  readonly DEVNET_PORT: number;
  readonly DEVNET_BLOCK_TIME: number;
}

export interface OpenedChain {
  readonly connection: ChainConnection;
  close(): Promise<void>;
}

/**
 * RPC_URL when set: that chain, with the contract addresses given or, failing those, as DEVNET_FILE
 * describes it (`npm run devnet` in another terminal). Unset: a devnet started here whose state is
 * kept in `<stateDir>/chain`, so deposits, registrations and sessions survive a restart.
 */
export async function openChain(
  settings: ChainSettings,
  stateDir: string,
  logger: Logger,
): Promise<OpenedChain> {
  const descriptionPath = resolveDevnetFile(settings.DEVNET_FILE ?? join(stateDir, 'devnet.json'));
  if (settings.RPC_URL) {
    const connection = await connectExternal(settings, settings.RPC_URL, descriptionPath);
    logger.info({ rpcUrl: connection.rpcUrl, chainId: connection.chainId }, 'using the chain at RPC_URL');
    return { connection, close: async () => {} };
  }
  const devnet = await startDevnet({
    port: settings.DEVNET_PORT,
    blockTimeSeconds: settings.DEVNET_BLOCK_TIME || undefined,
    descriptionPath,
    stateDir: join(stateDir, 'chain'),
    ...(settings.CHAIN_ID !== undefined ? { chainId: settings.CHAIN_ID } : {}),
    // The services start while anvil loads its KZG setup (~3.5 s); the first blob transaction waits for it.
    warmUpInBackground: true,
  });
  devnet.warmedUp.catch((error: unknown) =>
    logger.warn({ err: error }, 'the devnet KZG warm-up failed: the first blob transaction loads the setup'),
  );
  if (devnet.discardedStaleChain)
    logger.warn(
      { stateDir },
      'the kept devnet was deployed with other contract code, so a fresh chain was deployed; state that refers to the old chain (spend records, worker journals) is stale: `npm start -- --reset` starts everything afresh',
    );
  logger.info(
    { devnet: loggableSummary(devnet.description, descriptionPath), resumed: devnet.resumed },
    devnet.resumed ? 'devnet resumed from its kept state' : 'devnet deployed',
  );
  return { connection: fromDescription(devnet.description), close: () => devnet.stop() };
}

function fromDescription(description: DevnetDescription): ChainConnection {
  return {
    rpcUrl: description.rpcUrl,
    chainId: description.chainId,
    blockTimeSeconds: description.blockTimeSeconds,
    contracts: description.contracts,
    devnet: description,
  };
}

async function connectExternal(
  settings: ChainSettings,
  rpcUrl: string,
  descriptionPath: string,
): Promise<ChainConnection> {
  if (!settings.JOB_REGISTRY_ADDRESS || !settings.WORKER_REGISTRY_ADDRESS) {
    const connection = fromDescription(await describeExternalChain(rpcUrl, descriptionPath));
    assertChainId(settings, connection.chainId, rpcUrl);
    return connection;
  }
  const chainId = Number(BigInt(String(await jsonRpc(rpcUrl, 'eth_chainId', []))));
  assertChainId(settings, chainId, rpcUrl);
  const jobRegistry = getAddress(settings.JOB_REGISTRY_ADDRESS);
  if ((await jsonRpc(rpcUrl, 'eth_getCode', [jobRegistry, 'latest'])) === '0x') {
    throw new Error(`no contract at JOB_REGISTRY_ADDRESS ${jobRegistry} on chain ${chainId} (${rpcUrl})`);
  }
  return {
    rpcUrl,
    chainId,
    blockTimeSeconds: null,
    contracts: {
      jobRegistry,
      workerRegistry: getAddress(settings.WORKER_REGISTRY_ADDRESS),
      deploymentBlock: 0,
    },
    devnet: null,
  };
}

function assertChainId(settings: ChainSettings, served: number, rpcUrl: string): void {
  if (settings.CHAIN_ID !== undefined && settings.CHAIN_ID !== served) {
    throw new Error(`CHAIN_ID is ${settings.CHAIN_ID}, but ${rpcUrl} serves chain ${served}`);
  }
}
