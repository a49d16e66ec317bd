import { parseEther, type Wallet } from 'ethers';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { connectJobRegistry } from '@svc/contracts';
import { ChainClient } from '@svc/chain';
import { createLogger, EmbeddedEventBus, jobLifecycleTopic, type Store } from '@svc/platform';
import { closeClient, createClient, type ServiceClient } from '@svc/proto';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import type { JobLifecycleEvent } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { ChatRole } from '@svc/proto/gen/svc/common/v1/chat_pb';
import {
  JobOrchestrator,
  type RunCompletionRequestSchema,
  type RunCompletionResponse,
} from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { runTarget, type RunningTarget } from '@svc/runtime';
import type { Devnet } from '@svc/testkit';
import { jobOrchestratorModule, type JobOrchestratorInstance } from '../../src/module.js';
import { MODEL } from './models.js';
import {
  fundedWallet,
  startReferenceWorker,
  type ReferenceWorker,
  type ReferenceWorkerOptions,
} from './reference-worker.js';

/** Dev accounts of the test devnet as the service uses them. */
export const SERVICE_ACCOUNTS = { signer: 1, blobOperators: [2, 3], plainOperator: 5 } as const;

/** The service signer's operators accept its offers (once per devnet). */
export async function prepareServiceAccounts(devnet: Devnet): Promise<void> {
  const signer = devnet.wallet(SERVICE_ACCOUNTS.signer);
  const registry = connectJobRegistry(devnet.deployment.jobRegistryAddress, signer);
  for (const index of [...SERVICE_ACCOUNTS.blobOperators, SERVICE_ACCOUNTS.plainOperator]) {
    const operator = devnet.wallet(index);
    await (await registry.setOperator(operator.address, true)).wait();
    await (await registry.connect(operator).acceptOperator(signer.address)).wait();
  }
}

export type CompletionRequest = MessageInitShape<typeof RunCompletionRequestSchema>;
type JobOrchestratorClient = ServiceClient<typeof JobOrchestrator extends GenService<infer S> ? S : never>;
export type CompletionEvents = RunCompletionResponse['event'][];

export interface CompletionStack {
  readonly running: RunningTarget;
  readonly instance: JobOrchestratorInstance;
  readonly workers: ReferenceWorker[];
  /** Every lifecycle event published, in order. */
  readonly events: JobLifecycleEvent[];
  readonly chain: ChainClient;
  readonly signer: string;
  readonly client: JobOrchestratorClient;
  startWorker(options?: ReferenceWorkerOptions): Promise<ReferenceWorker>;
  /** A new wallet that deposited `deposit` and authorized the service signer for as much. */
  payingWallet(deposit?: bigint): Promise<Wallet>;
  /** Runs one completion through the gRPC API and collects its events. */
  complete(
    wallet: string,
    content: string | CompletionRequest['messages'],
    overrides?: Partial<CompletionRequest>,
  ): Promise<CompletionEvents>;
  stop(): Promise<void>;
}

let reservations = 0;

export async function startCompletionStack(
  devnet: Devnet,
  options: { store: Store; env?: Record<string, string>; workers?: ReferenceWorkerOptions[] },
): Promise<CompletionStack> {
  const bus = new EmbeddedEventBus();
  const events: JobLifecycleEvent[] = [];
  await bus.ensureTopics([jobLifecycleTopic]);
  await bus.subscribe(jobLifecycleTopic, {
    group: 'test',
    handler: async (event) => {
      events.push(event.message);
    },
  });
  const signer = devnet.wallet(SERVICE_ACCOUNTS.signer);
  const running = await runTarget(
    { name: 'job-orchestrator', modules: [jobOrchestratorModule] },
    {
      env: {
        GRPC_PORT: '0',
        LINK_HEARTBEAT_INTERVAL: '100ms',
        LINK_PRESENCE_TTL: '1s',
        SERVICE_SIGNER_PRIVATE_KEY: signer.privateKey,
        BLOB_OPERATOR_PRIVATE_KEYS: SERVICE_ACCOUNTS.blobOperators
          .map((index) => devnet.wallet(index).privateKey)
          .join(','),
        PLAIN_OPERATOR_PRIVATE_KEYS: devnet.wallet(SERVICE_ACCOUNTS.plainOperator).privateKey,
        TX_POLL_INTERVAL: '20ms',
        JOB_POLL_INTERVAL: '50ms',
        SESSION_CLAIM_POLL_INTERVAL: '50ms',
        KEEPER_INTERVAL: '200ms',
        FINAL_ANSWER_GRACE: '10s',
        // Tests open many sessions; the limit itself is tested by filling its window.
        SESSION_OPENS_PER_MINUTE: '1000',
        ...options.env,
      },
      provided: {
        store: options.store,
        bus,
        chain: {
          rpcUrl: devnet.anvil.rpcUrl,
          chainId: devnet.anvil.chainId,
          blockTimeSeconds: null,
          contracts: {
            jobRegistry: devnet.deployment.jobRegistryAddress,
            workerRegistry: devnet.deployment.workerRegistryAddress,
            deploymentBlock: devnet.deployment.deploymentBlock,
          },
          devnet: null,
        },
      },
      logger: createLogger({ service: 'orchestrator-test', level: process.env.TEST_LOG_LEVEL ?? 'silent' }),
    },
  );
  const instance = running.instances.get('job-orchestrator') as JobOrchestratorInstance;
  const client = createClient(JobOrchestrator, running.grpcAddress!);
  const workers: ReferenceWorker[] = [];
  const chain = new ChainClient({
    provider: devnet.provider,
    jobRegistryAddress: devnet.deployment.jobRegistryAddress,
    workerRegistryAddress: devnet.deployment.workerRegistryAddress,
  });

  const stack: CompletionStack = {
    running,
    instance,
    workers,
    events,
    chain,
    signer: signer.address,
    client,
    async startWorker(workerOptions = {}) {
      const worker = await startReferenceWorker(devnet, running.grpcAddress!, workerOptions);
      workers.push(worker);
      const address = worker.wallet.address;
      for (
        let waited = 0;
        !(await instance.linkServer!.live()).some((live) => live.address === address);
        waited += 50
      ) {
        if (waited > 15_000) throw new Error(`worker ${address} never linked`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return worker;
    },
    async payingWallet(deposit = parseEther('1')) {
      const wallet = (await fundedWallet(devnet)).connect(devnet.provider);
      const registry = connectJobRegistry(devnet.deployment.jobRegistryAddress, wallet);
      await (await registry.depositAndAuthorize(signer.address, { value: deposit })).wait();
      return wallet;
    },
    async complete(wallet, content, overrides = {}) {
      const collected: CompletionEvents = [];
      const request = {
        ...completionRequest(wallet, content, `reservation-${++reservations}`),
        ...overrides,
      };
      for await (const response of client.runCompletion(request as CompletionRequest))
        collected.push(response.event);
      return collected;
    },
    async stop() {
      closeClient(client);
      await Promise.all(workers.map((worker) => worker.stop()));
      await running.stop();
      await bus.close();
    },
  };
  return stack;
}

/**
 * A delegate-path `RunCompletion` request of the test model from `wallet`, under its own reservation id
 * (also its request id).
 */
export function completionRequest(
  wallet: string,
  content: string | CompletionRequest['messages'],
  reservationId: string,
): CompletionRequest {
  return {
    requestId: reservationId,
    model: MODEL.name,
    messages: typeof content === 'string' ? [{ role: ChatRole.USER, content }] : content,
    stream: true,
    payment: {
      case: 'delegate',
      value: {
        wallet: { hex: wallet },
        keyId: 'key-test',
        reservationId,
        maxFeeWei: { decimal: MODEL.feeWei.toString() },
      },
    },
  };
}

/** The text a call delivered: its deltas joined (streamed) or the completed text. */
export function deliveredText(events: CompletionEvents): string {
  return events
    .filter((event) => event.case === 'delta')
    .map((event) => event.value.text)
    .join('');
}

/** The cases in order, deltas collapsed into one entry, e.g. `['started', 'delta', 'completed']`. */
export function shapeOf(events: CompletionEvents): string[] {
  const shape: string[] = [];
  for (const event of events) if (event.case && shape.at(-1) !== event.case) shape.push(event.case);
  return shape;
}

export function failureOf(events: CompletionEvents) {
  const failed = events.find((event) => event.case === 'failed');
  return failed?.case === 'failed' ? failed.value : undefined;
}

export function completionOf(events: CompletionEvents) {
  const completed = events.find((event) => event.case === 'completed');
  return completed?.case === 'completed' ? completed.value : undefined;
}

export function retryOf(events: CompletionEvents) {
  const retrying = events.find((event) => event.case === 'retrying');
  return retrying?.case === 'retrying' ? retrying.value : undefined;
}
