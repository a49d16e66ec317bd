import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { JsonRpcProvider, Network } from 'ethers';
import { AnvilBlobSource, BeaconBlobSource, type BlobSource } from '@svc/chain';
import { createLogger, GracefulShutdown } from '@svc/platform';
import { loadWorkerConfig, type WorkerConfig } from './config.js';
import { HealthServer } from './health/health-server.js';
import { loadOrCreateWorkerKey } from './identity/worker-keystore.js';
import { buildModelBackend } from './model/build-model-backend.js';
import { startWorker } from './service.js';

// Reads the configuration, wires the real dependencies and runs the worker until SIGTERM.

const SOFTWARE = 'svc-reference-worker/0.1.0';

function openBlobSource(config: WorkerConfig, provider: JsonRpcProvider): BlobSource {
  if (!config.BEACON_API_URL) return new AnvilBlobSource({ rpcUrl: config.CHAIN_RPC_URL ?? '' });
  return new BeaconBlobSource({
    baseUrl: config.BEACON_API_URL,
    executionBlocks: { getBlock: (blockNumber) => provider.getBlock(blockNumber) },
  });
}

async function main(): Promise<void> {
  const config = loadWorkerConfig();
  const logger = createLogger({ service: 'worker', level: config.LOG_LEVEL });
  const shutdown = new GracefulShutdown({ logger, timeoutMs: config.DRAIN_TIMEOUT + 15_000 });
  shutdown.listen();

  const keystorePath = config.KEYSTORE_PATH ?? join(config.DATA_DIR, 'worker-keystore.json');
  const key = await loadOrCreateWorkerKey({ path: keystorePath, password: config.KEYSTORE_PASSWORD });
  if (key.created)
    logger.warn({ worker: key.wallet.address }, 'created a new worker key: fund this address to stake');

  const network = Network.from(config.CHAIN_ID);
  const provider = new JsonRpcProvider(config.CHAIN_RPC_URL, network, {
    staticNetwork: network,
    cacheTimeout: -1,
    pollingInterval: Math.max(Math.floor(config.BLOCK_TIME / 4), 50),
  });
  const served = BigInt(await provider.send('eth_chainId', []));
  if (served !== BigInt(config.CHAIN_ID)) {
    throw new Error(`CHAIN_RPC_URL serves chain ${served}, CHAIN_ID says ${config.CHAIN_ID}`);
  }
  shutdown.add('chain provider', () => provider.destroy());

  const worker = await startWorker({
    settings: {
      dataDir: config.DATA_DIR,
      stakeWei: config.STAKE_WEI,
      capacity: config.CAPACITY,
      sessionLimit: config.SESSION_LIMIT,
      guards: {
        minRunSeconds: Math.ceil(config.MIN_RUN_TIME / 1000),
        commitMarginSeconds: Math.ceil(config.COMMIT_MARGIN / 1000),
      },
      claimMarginSeconds: Math.ceil(config.CLAIM_MARGIN / 1000),
      coalesceMs: config.DELTA_COALESCE,
      maxDeltaChars: config.MAX_DELTA_CHARS,
      confirmations: config.CONFIRMATIONS,
      pollIntervalMs: config.LOG_POLL_INTERVAL,
      ...(config.START_BLOCK >= 0 ? { fromBlock: config.START_BLOCK } : {}),
      withdrawThresholdWei: config.WITHDRAW_THRESHOLD_WEI,
      releaseIntervalMs: config.RELEASE_INTERVAL,
    },
    provider,
    wallet: key.wallet,
    password: config.KEYSTORE_PASSWORD,
    jobRegistryAddress: config.JOB_REGISTRY_ADDRESS,
    workerRegistryAddress: config.WORKER_REGISTRY_ADDRESS,
    blobSource: openBlobSource(config, provider),
    model: buildModelBackend(config),
    ...(config.ORCHESTRATOR_LINK
      ? {
          link: {
            target: config.ORCHESTRATOR_LINK,
            backoff: { initialMs: config.LINK_BACKOFF_INITIAL, maxMs: config.LINK_BACKOFF_MAX },
            defaultHeartbeatMs: config.HEARTBEAT_INTERVAL,
            software: SOFTWARE,
          },
        }
      : {}),
    logger,
  });
  shutdown.add('worker', () => worker.stop());

  const health = new HealthServer({
    host: config.HEALTH_HOST,
    port: config.HEALTH_PORT,
    metrics: worker.metrics.registry,
    notReadyBecause: () => {
      const status = worker.status();
      if (status.draining) return 'draining';
      if (worker.link && !worker.link.connected) return 'worker link down';
      return undefined;
    },
  });
  const healthPort = await health.listen();
  shutdown.add('health server', () => health.close());
  // Runs first on SIGTERM: claim nothing new, let the jobs in flight finish (bounded).
  shutdown.add('drain', () => Promise.race([worker.drain(), sleep(config.DRAIN_TIMEOUT)]));
  logger.info({ worker: worker.address, healthPort }, 'worker running');
}

main().catch((error: unknown) => {
  const logger = createLogger({ service: 'worker' });
  logger.fatal({ err: error }, 'worker failed to start');
  process.exit(1);
});
