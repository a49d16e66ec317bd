import { connectChain, countKzgWork, kzgThreads } from '@svc/chain';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { WorkerLink } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { createServiceGrpcServer, serviceCallers } from '@svc/platform';
import { closeClient } from '@svc/proto';
import { defineModule, grpcServerMetrics, loopbackFor, peerClient, type ServiceInstance } from '@svc/runtime';
import { jobOrchestratorConfigShape } from './config.js';
import { jobOrchestratorHandlers } from './completions/job-orchestrator-service.js';
import { linkTlsCredentials } from './link/link-tls.js';
import type { WorkerLinkServer } from './link/worker-link-server.js';
import {
  buildJobOrchestrator,
  stopCompletions,
  verifyServiceAccounts,
  type JobOrchestratorParts,
} from './service.js';

/** A job-orchestrator; its parts (linked workers, completions, keeper), built before it starts. */
export interface JobOrchestratorInstance extends ServiceInstance {
  readonly linkServer: WorkerLinkServer;
  readonly parts: JobOrchestratorParts;
  /** `worker-link`: `host:port` of the worker link's own listener, once started. */
  readonly listeners: { readonly 'worker-link': string | undefined };
}

/**
 * The job-orchestrator as the runner runs it: serves JobOrchestrator on the process's gRPC server and
 * WorkerLink on a listener of its own (WORKER_LINK_HOST, WORKER_LINK_PORT), with worker presence,
 * sessions, answer frames and nonces in the shared store, lifecycle events on the bus, and the job
 * keeper following the chain.
 */
export const jobOrchestratorModule = defineModule({
  name: 'job-orchestrator',
  configShape: jobOrchestratorConfigShape,
  needs: ['store', 'bus', 'chain', 'grpc', 'metrics'],
  peers: { SETTLER_ADDRESS: 'payment-settler' },
  build(config, { store, bus, chain, grpc, metrics, logger }): JobOrchestratorInstance {
    // Its own provider with no call cache: reads right after a write must see it. Nothing here reaches
    // the network: the provider, the client and the parts connect on their first call.
    const { provider, client } = connectChain(chain);
    const settler = peerClient(PaymentSettler, {
      config,
      from: 'job-orchestrator',
      to: 'payment-settler',
      address: config.SETTLER_ADDRESS,
      timeoutMs: config.SETTLER_TIMEOUT,
    });
    const parts = buildJobOrchestrator({
      config,
      store,
      bus,
      chain: client,
      provider,
      chainId: BigInt(chain.chainId),
      deploymentBlock: chain.contracts.deploymentBlock,
      logger,
      metrics,
      ...(settler ? { settler } : {}),
    });
    // Workers are not our services: they prove their address in the link's own challenge. The link has
    // a listener of its own, so exposing it to workers outside the cluster exposes nothing else.
    const link = createServiceGrpcServer(logger, {
      requireAccess: true,
      onCallEnd: grpcServerMetrics(metrics),
    });
    link.add(WorkerLink, parts.linkServer.handlers, { open: true });
    let linkAddress: string | undefined;
    return {
      linkServer: parts.linkServer,
      parts,
      get listeners() {
        return { 'worker-link': linkAddress };
      },
      async start() {
        // Hints routed from other replicas reach this one's links from the first link on.
        await parts.linkServer.start();
        if (parts.completions) {
          // The KZG threads load their trusted setups (seconds) now rather than on the first call.
          kzgThreads.warmUp();
          countKzgWork(metrics);
          await verifyServiceAccounts(config, parts.completions.chain);
          parts.completions.keeper.start();
          parts.completions.lifecycleRelay.start();
        } else {
          logger.warn('SERVICE_SIGNER_PRIVATE_KEY is not set: completions answer 503 not_configured');
        }
        const bind = `${config.WORKER_LINK_HOST}:${config.WORKER_LINK_PORT}`;
        const tls = await linkTlsCredentials(config);
        // gRPC's own error names no address, and this process binds two.
        const linkPort = await link.listen(bind, tls ? { credentials: tls } : {}).catch((error: unknown) => {
          throw new Error(`the worker link cannot listen on ${bind} (WORKER_LINK_HOST, WORKER_LINK_PORT)`, {
            cause: error,
          });
        });
        // Workers beside it in the process dial this (their ORCHESTRATOR_LINK), with TLS when it serves TLS.
        linkAddress = `${tls ? 'tls://' : ''}${loopbackFor(config.WORKER_LINK_HOST)}:${linkPort}`;
        grpc.add(
          JobOrchestrator,
          jobOrchestratorHandlers(parts.catalogue, parts.completions?.runner, {
            chainId: BigInt(chain.chainId),
            jobRegistry: client.addresses.jobRegistry,
            delegate: parts.completions?.chain.principal,
          }),
          {
            authenticate: serviceCallers(config, {
              service: 'job-orchestrator',
              grpcService: JobOrchestrator,
            }),
          },
        );
        logger.info(
          {
            workerLink: linkAddress,
            workerLinkTls: Boolean(tls),
            heartbeatIntervalMs: config.LINK_HEARTBEAT_INTERVAL,
            principal: parts.completions?.chain.principal ?? null,
            completions: Boolean(parts.completions) && config.COMPLETIONS_ENABLED,
            perCallPayments: Boolean(settler),
          },
          'job-orchestrator serving WorkerLink and JobOrchestrator',
        );
      },
      async stop() {
        // One deadline for calls, keeper and lifecycle events: DRAIN_TIMEOUT, and a second to free locks.
        if (parts.completions) await stopCompletions(parts.completions, config.DRAIN_TIMEOUT, logger);
        // Links end (workers redial another replica) only once the calls they answer have drained.
        await parts.linkServer.stop();
        await link.shutdown();
        if (settler) closeClient(settler);
        provider.destroy();
      },
    };
  },
});
