import type { JsonRpcProvider } from 'ethers';
import { connectChain } from '@svc/chain';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { WorkerLink } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { jobLifecycleTopic, serviceCallers, serviceClientOptions, ServiceIdentity } from '@svc/platform';
import { closeClient, createClient } from '@svc/proto';
import { defineModule, type ServiceInstance } from '@svc/runtime';
import { jobOrchestratorConfigShape } from './config.js';
import { jobOrchestratorHandlers } from './completions/job-orchestrator-service.js';
import type { PaymentSettlerClient } from './completions/per-call-settlement.js';
import type { WorkerLinkServer } from './link/worker-link-server.js';
import { buildJobOrchestrator, verifyServiceAccounts, type JobOrchestratorParts } from './service.js';

/** A running job-orchestrator; its parts (linked workers, completions, keeper) once started. */
export interface JobOrchestratorInstance extends ServiceInstance {
  readonly linkServer: WorkerLinkServer | undefined;
  readonly parts: JobOrchestratorParts | undefined;
}

/**
 * The job-orchestrator as the runner runs it: serves WorkerLink and JobOrchestrator on the process's
 * gRPC server, with worker presence, sessions, answer frames and nonces in the shared store, lifecycle
 * events on the bus, and the job keeper following the chain.
 */
export const jobOrchestratorModule = defineModule({
  name: 'job-orchestrator',
  configShape: jobOrchestratorConfigShape,
  needs: ['store', 'bus', 'chain', 'grpc'],
  peers: { SETTLER_ADDRESS: 'payment-settler' },
  build(config, { store, bus, chain, grpc, logger }): JobOrchestratorInstance {
    let provider: JsonRpcProvider | undefined;
    let settler: PaymentSettlerClient | undefined;
    let parts: JobOrchestratorParts | undefined;
    return {
      get linkServer() {
        return parts?.linkServer;
      },
      get parts() {
        return parts;
      },
      async start() {
        // Its own provider with no call cache: reads right after a write must see it.
        const connected = connectChain(chain);
        provider = connected.provider;
        const client = connected.client;
        if (config.SETTLER_ADDRESS)
          settler = createClient(
            PaymentSettler,
            config.SETTLER_ADDRESS,
            serviceClientOptions({
              identity: new ServiceIdentity('job-orchestrator', config.SERVICE_TOKEN_SECRET),
              audience: 'payment-settler',
              defaultUnaryTimeoutMs: config.SETTLER_TIMEOUT,
            }),
          );
        parts = buildJobOrchestrator({
          config,
          store,
          bus,
          chain: client,
          provider,
          chainId: BigInt(chain.chainId),
          deploymentBlock: chain.contracts.deploymentBlock,
          logger,
          ...(settler ? { settler } : {}),
        });
        if (parts.completions) {
          await verifyServiceAccounts(config, parts.completions.chain);
          await bus.ensureTopics([jobLifecycleTopic]);
          parts.completions.keeper.start();
        } else {
          logger.warn('SERVICE_SIGNER_PRIVATE_KEY is not set: completions answer 503 not_configured');
        }
        // Workers are not our services: they prove their address in the link's own challenge.
        grpc.add(WorkerLink, parts.linkServer.handlers, { open: true });
        grpc.add(
          JobOrchestrator,
          jobOrchestratorHandlers(parts.catalogue, parts.completions?.runner, {
            chainId: BigInt(chain.chainId),
            jobRegistry: client.addresses.jobRegistry,
            delegate: parts.completions?.chain.principal,
          }),
          { authenticate: serviceCallers(config, { service: 'job-orchestrator', callers: ['gateway'] }) },
        );
        logger.info(
          {
            heartbeatIntervalMs: config.LINK_HEARTBEAT_INTERVAL,
            principal: parts.completions?.chain.principal ?? null,
            completions: Boolean(parts.completions) && config.COMPLETIONS_ENABLED,
            perCallPayments: Boolean(settler),
          },
          'job-orchestrator serving WorkerLink and JobOrchestrator',
        );
      },
      async stop() {
        const completions = parts?.completions;
        if (completions) {
          const left = await completions.runner.drain(config.DRAIN_TIMEOUT);
          if (left > 0)
            logger.warn(
              { calls: left },
              'stopping with calls in progress; the job keeper takes their jobs over',
            );
          await completions.keeper.stop();
        }
        await parts?.linkServer.stop();
        if (settler) closeClient(settler);
        provider?.destroy();
      },
    };
  },
});
