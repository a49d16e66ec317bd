import { createLogger, type Store } from '@svc/platform';
import { ChainClient } from '@svc/chain';
import { GrpcServer } from '@svc/proto';
import { WorkerLink, type HintAck } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import type { Devnet } from '@svc/testkit';
import { RegistryJobAttempts } from '../../src/link/job-attempts.js';
import { RegistryWorkerAdmission } from '../../src/link/worker-admission.js';
import { WorkerLinkServer } from '../../src/link/worker-link-server.js';

export const TEST_LINK_TIMING = { heartbeatIntervalMs: 200, presenceTtlMs: 1_000, challengeTtlMs: 2_000 };

/** One orchestrator replica serving WorkerLink over real gRPC, the devnet and the given store. */
export class OrchestratorReplica {
  readonly server: WorkerLinkServer;
  readonly chain: ChainClient;
  readonly hintAcks: { worker: string; ack: HintAck }[] = [];
  readonly #grpc = new GrpcServer();
  #port = 0;

  constructor(devnet: Devnet, store: Store) {
    this.chain = new ChainClient({
      provider: devnet.provider,
      jobRegistryAddress: devnet.deployment.jobRegistryAddress,
      workerRegistryAddress: devnet.deployment.workerRegistryAddress,
    });
    this.server = new WorkerLinkServer({
      chainId: BigInt(devnet.anvil.chainId),
      jobRegistry: devnet.deployment.jobRegistryAddress,
      orchestrator: 'svc job-orchestrator (test)',
      ...TEST_LINK_TIMING,
      admission: new RegistryWorkerAdmission(this.chain, 1_000),
      attempts: new RegistryJobAttempts(this.chain),
      store,
      logger: createLogger({ service: 'orchestrator-test', level: process.env.TEST_LOG_LEVEL ?? 'fatal' }),
      onHintAck: (worker, ack) => this.hintAcks.push({ worker, ack }),
    });
  }

  get target(): string {
    return `127.0.0.1:${this.#port}`;
  }

  async start(): Promise<void> {
    this.#grpc.add(WorkerLink, this.server.handlers);
    this.#port = await this.#grpc.listen('127.0.0.1:0');
  }

  async stop(): Promise<void> {
    await this.server.stop();
    await this.#grpc.shutdown(200);
  }
}
