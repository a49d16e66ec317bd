import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { JsonRpcProvider } from 'ethers';
import { Network, Wallet } from 'ethers';
import {
  AnvilBlobSource,
  BeaconBlobSource,
  RpcProvider,
  countKzgWork,
  kzgThreads,
  type BlobSource,
} from '@svc/chain';
import { defineModule, loopbackFor, type ChainConnection, type ServiceInstance } from '@svc/runtime';
import type { WorkerConfig } from './config.js';
import { workerConfigShape } from './config.js';
import { HealthServer } from './health/health-server.js';
import { loadOrCreateWorkerKey } from './identity/worker-keystore.js';
import { buildModelBackend } from './model/build-model-backend.js';
import { isLoopbackTarget, resolveLinkTarget } from './link/link-target.js';
import { linkBackoff } from './link/worker-link.js';
import { startWorker } from './service.js';
import type { RunningWorker } from './worker-types.js';

const SOFTWARE = 'svc-reference-worker/0.1.0';

/** A running worker; `address` and `healthUrl` are known once it started. */
export interface WorkerInstance extends ServiceInstance {
  readonly worker: RunningWorker | undefined;
  readonly healthUrl: string | undefined;
}

/**
 * The reference worker as the runner runs it: its key (a secret or its keystore), registration and
 * stake, sessions and jobs on the chain, the worker link when an orchestrator is named, and its own
 * health and metrics server. On stop it drains (bounded by DRAIN_TIMEOUT) before it stops.
 */
export const workerModule = defineModule({
  name: 'worker',
  configShape: workerConfigShape,
  needs: ['chain'],
  // In the all-in-one process the worker links to the orchestrator running beside it, on its link listener.
  peers: { ORCHESTRATOR_LINK: { target: 'job-orchestrator', listener: 'worker-link' } },
  build(config, { chain, logger, stateDir }): WorkerInstance {
    const dataDir = config.DATA_DIR ?? join(stateDir, 'worker');
    // Nothing here reaches the network or the disk: the provider, blob source and model backend connect
    // on their first call. The key (a file in its keystore) is read in start.
    const provider = chainProvider(chain, config);
    const blobSource = openBlobSource(config, chain, provider);
    const model = buildModelBackend(config);
    let worker: RunningWorker | undefined;
    let health: HealthServer | undefined;
    let healthUrl: string | undefined;

    async function stop(): Promise<void> {
      // Unreferenced: a drain that ends first must not leave the timer holding the process open.
      if (worker)
        await Promise.race([worker.drain(), sleep(config.DRAIN_TIMEOUT, undefined, { ref: false })]);
      await health?.close();
      await worker?.stop();
      provider.destroy();
      worker = undefined;
      health = undefined;
    }

    return {
      get worker() {
        return worker;
      },
      get healthUrl() {
        return healthUrl;
      },
      // A failed start is undone by the runner, which calls stop (safe at any point of start).
      async start() {
        // The KZG threads load their trusted setups (seconds) now rather than on the first job handed over.
        kzgThreads.warmUp();
        const wallet = await workerWallet(config, dataDir, logger);
        const link = config.ORCHESTRATOR_LINK
          ? await resolveLinkTarget(config.ORCHESTRATOR_LINK, config.ORCHESTRATOR_LINK_CA_FILE)
          : undefined;
        if (link && !link.tls && !isLoopbackTarget(link.target))
          logger.warn(
            { orchestratorLink: link.target },
            'the worker link is plaintext off this machine: anyone on the path sees and can alter it; dial tls://',
          );
        const running = await startWorker({
          settings: workerSettings(config, dataDir),
          provider,
          wallet,
          password: config.KEYSTORE_PASSWORD,
          jobRegistryAddress: chain.contracts.jobRegistry,
          workerRegistryAddress: chain.contracts.workerRegistry,
          blobSource,
          model,
          ...(link
            ? {
                link: {
                  target: link.target,
                  ...(link.credentials ? { credentials: link.credentials } : {}),
                  backoff: linkBackoff(config.LINK_BACKOFF_INITIAL, config.LINK_BACKOFF_MAX),
                  defaultHeartbeatMs: config.HEARTBEAT_INTERVAL,
                  software: SOFTWARE,
                },
              }
            : {}),
          logger,
        });
        worker = running;
        countKzgWork(running.metrics.registry);
        health = new HealthServer({
          host: config.HEALTH_HOST,
          port: config.HEALTH_PORT,
          metrics: running.metrics.registry,
          notReadyBecause: () => {
            const status = running.status();
            if (status.draining) return 'draining';
            if (running.link && !running.link.connected) return 'worker link down';
            return undefined;
          },
        });
        const port = await health.listen();
        healthUrl = `http://${loopbackFor(config.HEALTH_HOST)}:${port}`;
        logger.info({ worker: running.address, health: healthUrl }, 'worker running');
      },
      stop,
    };
  },
});

async function workerWallet(
  config: WorkerConfig,
  dataDir: string,
  logger: { warn: (o: object, m: string) => void },
): Promise<Wallet> {
  if (config.WORKER_PRIVATE_KEY) return new Wallet(config.WORKER_PRIVATE_KEY);
  const key = await loadOrCreateWorkerKey({
    path: config.KEYSTORE_PATH ?? join(dataDir, 'worker-keystore.json'),
    password: config.KEYSTORE_PASSWORD,
  });
  if (key.created)
    logger.warn({ worker: key.wallet.address }, 'created a new worker key: fund this address to stake');
  return key.wallet;
}

function chainProvider(chain: ChainConnection, config: WorkerConfig): JsonRpcProvider {
  const network = Network.from(chain.chainId);
  return new RpcProvider(chain.rpcUrl, network, {
    staticNetwork: network,
    cacheTimeout: -1,
    batchStallTime: 0,
    pollingInterval: Math.max(Math.floor(config.BLOCK_TIME / 4), 50),
  });
}

function openBlobSource(config: WorkerConfig, chain: ChainConnection, provider: JsonRpcProvider): BlobSource {
  if (!config.BEACON_API_URL) return new AnvilBlobSource({ rpcUrl: chain.rpcUrl });
  return new BeaconBlobSource({
    baseUrl: config.BEACON_API_URL,
    executionBlocks: { getBlock: (blockNumber) => provider.getBlock(blockNumber) },
  });
}

function workerSettings(config: WorkerConfig, dataDir: string) {
  return {
    dataDir,
    stakeWei: config.STAKE_WEI,
    capacity: config.CAPACITY,
    sessionLimit: config.SESSION_LIMIT,
    sessionSweepIntervalMs: config.SESSION_SWEEP_INTERVAL,
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
  };
}
