import { JsonRpcProvider, Network } from 'ethers';
import { ChainClient } from '@svc/chain';
import { WorkerLink } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { defineModule, type ServiceInstance } from '@svc/runtime';
import { jobOrchestratorConfigShape } from './config.js';
import type { WorkerLinkServer } from './link/worker-link-server.js';
import { buildWorkerLinkServer } from './service.js';

/** A running job-orchestrator; `linkServer` (the linked workers, hints, acknowledgements) once started. */
export interface JobOrchestratorInstance extends ServiceInstance {
  readonly linkServer: WorkerLinkServer | undefined;
}

/**
 * The job-orchestrator as the runner runs it: serves WorkerLink on the process's gRPC server, with
 * worker presence and answer frames in the shared store and admission read from the chain.
 */
export const jobOrchestratorModule = defineModule({
  name: 'job-orchestrator',
  configShape: jobOrchestratorConfigShape,
  needs: ['store', 'chain', 'grpc'],
  build(config, { store, chain, grpc, logger }): JobOrchestratorInstance {
    let provider: JsonRpcProvider | undefined;
    let linkServer: WorkerLinkServer | undefined;
    return {
      get linkServer() {
        return linkServer;
      },
      async start() {
        const network = Network.from(chain.chainId);
        // No call cache: a frame check must see a reassignment mined a moment ago.
        provider = new JsonRpcProvider(chain.rpcUrl, network, { staticNetwork: network, cacheTimeout: -1 });
        const client = new ChainClient({
          provider,
          jobRegistryAddress: chain.contracts.jobRegistry,
          workerRegistryAddress: chain.contracts.workerRegistry,
        });
        linkServer = buildWorkerLinkServer({
          config,
          store,
          chain: client,
          chainId: BigInt(chain.chainId),
          logger,
        });
        grpc.add(WorkerLink, linkServer.handlers);
        logger.info(
          { heartbeatIntervalMs: config.LINK_HEARTBEAT_INTERVAL },
          'job-orchestrator serving WorkerLink',
        );
      },
      async stop() {
        await linkServer?.stop();
        provider?.destroy();
      },
    };
  },
});
