import type { ChainClient } from '@svc/chain';
import type { Logger, Store } from '@svc/platform';
import type { JobOrchestratorConfig } from './config.js';
import { RegistryJobAttempts } from './link/job-attempts.js';
import { RegistryWorkerAdmission } from './link/worker-admission.js';
import { WorkerLinkServer } from './link/worker-link-server.js';

export interface JobOrchestratorPorts {
  readonly config: JobOrchestratorConfig;
  readonly store: Store;
  readonly chain: ChainClient;
  readonly chainId: bigint;
  readonly logger: Logger;
}

/** The worker link server over the chain's registries and the shared store. */
export function buildWorkerLinkServer(ports: JobOrchestratorPorts): WorkerLinkServer {
  const { config, store, chain, chainId, logger } = ports;
  return new WorkerLinkServer({
    chainId,
    jobRegistry: chain.addresses.jobRegistry,
    orchestrator: config.LINK_ORCHESTRATOR_NAME,
    heartbeatIntervalMs: config.LINK_HEARTBEAT_INTERVAL,
    presenceTtlMs: config.LINK_PRESENCE_TTL,
    challengeTtlMs: config.LINK_CHALLENGE_TTL,
    admission: new RegistryWorkerAdmission(chain, config.LINK_WORKER_STATUS_CACHE_TTL),
    attempts: new RegistryJobAttempts(chain),
    store,
    logger,
  });
}
