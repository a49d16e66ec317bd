import { parseEther, type Wallet } from 'ethers';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { connectJobRegistry, modelIdOf } from '@svc/contracts';
import { ChainClient } from '@svc/chain';
import { createLogger, EmbeddedEventBus, jobLifecycleTopic, type Store } from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS, testServiceClientOptions } from '@svc/platform/testing';
import { closeClient, createClient, type ServiceClient } from '@svc/proto';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import type { JobLifecycleEvent } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { ChatRole } from '@svc/proto/gen/svc/common/v1/chat_pb';
import {
  JobOrchestrator,
  type RunCompletionRequestSchema,
  type RunCompletionResponse,
} from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { paymentSettlerModule } from '@svc/payment-settler';
import { runTarget, type RunningTarget } from '@svc/runtime';
import type { Devnet } from '@svc/testkit';
import { jobOrchestratorModule, type JobOrchestratorInstance } from '../../src/module.js';
import { MODEL } from './models.js';
import { OPEN_SESSIONS_GROUP, sessionPoolGroup } from '../../src/sessions/session-records.js';
import {
  fundedWallet,
  startReferenceWorker,
  type ReferenceWorker,
  type ReferenceWorkerOptions,
} from './reference-worker.js';

/** Dev accounts of the test devnet as the service uses them. */
export const SERVICE_ACCOUNTS = {
  signer: 1,
  blobOperators: [2, 3],
  plainOperator: 5,
  facilitator: 6,
  facilitatorOperator: 7,
} as const;

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

/**
 * The per-call side: the service signer authorizes the facilitator as its delegate, and the facilitator's
 * operator accepts its offer (once per devnet).
 */
export async function preparePerCallAccounts(devnet: Devnet): Promise<void> {
  const signer = devnet.wallet(SERVICE_ACCOUNTS.signer);
  const facilitator = devnet.wallet(SERVICE_ACCOUNTS.facilitator);
  const operator = devnet.wallet(SERVICE_ACCOUNTS.facilitatorOperator);
  const registry = connectJobRegistry(devnet.deployment.jobRegistryAddress, signer);
  await (await registry.setDelegateAuthorization(facilitator.address, true)).wait();
  await (await registry.connect(facilitator).setOperator(operator.address, true)).wait();
  await (await registry.connect(operator).acceptOperator(facilitator.address)).wait();
}

export type CompletionRequest = MessageInitShape<typeof RunCompletionRequestSchema>;
type JobOrchestratorClient = ServiceClient<typeof JobOrchestrator extends GenService<infer S> ? S : never>;
type PaymentSettlerClient = ServiceClient<typeof PaymentSettler extends GenService<infer S> ? S : never>;
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
  /** The payment-settler, when the stack takes per-call payments, called as the gateway calls it. */
  readonly settler: PaymentSettlerClient | undefined;
  /** The same settler called as the job-orchestrator, the one caller granted SettlePayment. */
  readonly settlerAsOrchestrator: PaymentSettlerClient | undefined;
  readonly facilitator: string;
  startWorker(options?: ReferenceWorkerOptions): Promise<ReferenceWorker>;
  /** A new wallet that deposited `deposit` and authorized the service signer for as much. */
  payingWallet(deposit?: bigint): Promise<Wallet>;
  /** Runs one completion through the gRPC API and collects its events. */
  complete(
    wallet: string,
    content: string | CompletionRequest['messages'],
    overrides?: Partial<CompletionRequest>,
  ): Promise<CompletionEvents>;
  /**
   * Closes every session waiting in the service's pool for `model` (on chain and in the store), so the next
   * call opens its own: every call runs in the service's shared sessions, and a case about opening one,
   * or about which worker a new session goes to, starts from an empty pool.
   */
  closePooledSessions(model?: string): Promise<void>;
  stop(): Promise<void>;
}

let reservations = 0;

export interface CompletionStackOptions {
  readonly store: Store;
  readonly env?: Record<string, string>;
  readonly workers?: ReferenceWorkerOptions[];
  /**
   * Runs a payment-settler beside the orchestrator (in its own target, as in a deployment), reaching the
   * chain at `rpcUrl` (a fault-injecting proxy, say); needs `preparePerCallAccounts`.
   */
  readonly perCall?: { readonly rpcUrl?: string };
  /** Where the orchestrator reaches the chain (a fault-injecting proxy, say); the devnet's node by default. */
  readonly rpcUrl?: string;
}

export async function startCompletionStack(
  devnet: Devnet,
  options: CompletionStackOptions,
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
  const facilitator = devnet.wallet(SERVICE_ACCOUNTS.facilitator);
  const logger = createLogger({
    service: 'orchestrator-test',
    level: process.env.TEST_LOG_LEVEL ?? 'silent',
  });
  const settling = options.perCall
    ? await runTarget(
        { name: 'payment-settler', modules: [paymentSettlerModule] },
        {
          env: {
            GRPC_PORT: '0',
            METRICS_PORT: '0',
            FACILITATOR_PRIVATE_KEY: facilitator.privateKey,
            FACILITATOR_OPERATOR_PRIVATE_KEYS: devnet.wallet(SERVICE_ACCOUNTS.facilitatorOperator).privateKey,
            PAY_TO_ADDRESS: signer.address,
            TX_POLL_INTERVAL: '20ms',
            ...TEST_SERVICE_TOKEN_SETTINGS,
          },
          provided: { store: options.store, chain: devnet.connection(options.perCall.rpcUrl) },
          logger,
        },
      )
    : undefined;
  const running = await runTarget(
    { name: 'job-orchestrator', modules: [jobOrchestratorModule] },
    {
      env: {
        GRPC_PORT: '0',
        METRICS_PORT: '0',
        WORKER_LINK_PORT: '0',
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
        // Tests open many sessions; the limit itself is tested by filling its window, and the budgets of
        // sessions nobody paid for in session-pool.unit.test.ts.
        SESSION_OPENS_PER_MINUTE: '1000',
        SESSION_OPENS_UNPAID_PER_MINUTE: '1000',
        SESSION_UNUSED_PER_WALLET: '1000',
        SESSION_UNUSED_PER_KEY: '1000',
        // Sessions open only when a call needs one, so the cases can count them; the spare sessions kept
        // ahead of demand are tested by the cases that set SESSION_WARM_SPARE.
        SESSION_WARM_SPARE: '0',
        ...(settling ? { SETTLER_ADDRESS: settling.grpcAddress! } : {}),
        ...TEST_SERVICE_TOKEN_SETTINGS,
        ...options.env,
      },
      provided: {
        store: options.store,
        bus,
        chain: devnet.connection(options.rpcUrl),
      },
      logger,
    },
  );
  const instance = running.instances.get('job-orchestrator') as JobOrchestratorInstance;
  const client = createClient(
    JobOrchestrator,
    running.grpcAddress!,
    testServiceClientOptions('job-orchestrator'),
  );
  const settler = settling
    ? createClient(PaymentSettler, settling.grpcAddress!, testServiceClientOptions('payment-settler'))
    : undefined;
  const settlerAsOrchestrator = settling
    ? createClient(
        PaymentSettler,
        settling.grpcAddress!,
        testServiceClientOptions('payment-settler', { as: 'job-orchestrator' }),
      )
    : undefined;
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
    settler,
    settlerAsOrchestrator,
    facilitator: facilitator.address,
    async startWorker(workerOptions = {}) {
      const worker = await startReferenceWorker(devnet, instance.listeners['worker-link']!, workerOptions);
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
    async closePooledSessions(model = MODEL.name) {
      const group = sessionPoolGroup(signer.address, modelIdOf(model));
      const registry = connectJobRegistry(devnet.deployment.jobRegistryAddress, signer);
      for (const pooled of await options.store.presence.list(group)) {
        await options.store.presence.withdraw(group, pooled.member);
        await options.store.presence.withdraw(OPEN_SESSIONS_GROUP, pooled.member);
        await (await registry.closeSession(BigInt(pooled.member))).wait();
      }
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
      if (settler) closeClient(settler);
      if (settlerAsOrchestrator) closeClient(settlerAsOrchestrator);
      // Everything is stopped even when a worker's stop fails, so a failure never leaves a replica running.
      const stopped = await Promise.allSettled(workers.map((worker) => worker.stop()));
      await running.stop();
      await settling?.stop();
      await bus.close();
      for (const result of stopped) if (result.status === 'rejected') throw result.reason;
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
