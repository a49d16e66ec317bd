import { randomUUID } from 'node:crypto';
import { getBytes, Wallet, type JsonRpcProvider } from 'ethers';
import {
  OperatorLanes,
  StoreSentTransactionJournal,
  TransactionSender,
  type ChainClient,
  type SendingAccount,
} from '@svc/chain';
import { Deadline, MemoryStore, type EventBus, type Logger, type Store, waitAtMost } from '@svc/platform';
import type { Registry } from 'prom-client';
import type { JobOrchestratorConfig } from './config.js';
import { ServiceChain } from './chain/service-chain.js';
import { AnswerRelay } from './completions/answer-relay.js';
import { CompletionRunner } from './completions/completion-runner.js';
import { WaitingCalls } from './completions/waiting-calls.js';
import { ModelCatalogue } from './completions/model-catalogue.js';
import { PaymentPaths } from './completions/payment-paths/payment-paths.js';
import { ReplyKeyEscrow } from './completions/reply-key-escrow.js';
import { PendingSubmissions } from './keeper/pending-submissions.js';
import { PerCallSettlement, type PaymentSettlerClient } from './completions/per-call-settlement.js';
import { LifecyclePublisher } from './events/lifecycle-events.js';
import {
  LifecycleRelay,
  lifecycleOutboxEvents,
  lifecycleOutboxOldestAgeSeconds,
} from './events/lifecycle-relay.js';
import { JobKeeper } from './keeper/job-keeper.js';
import { TrackedJobs } from './keeper/tracked-jobs.js';
import { HandedOverJobs } from './link/handed-over-jobs.js';
import { SessionWarmer } from './sessions/session-warmer.js';
import { UnconfirmedFees } from './completions/payment-paths/unconfirmed-fees.js';
import { RegistryJobAttempts } from './link/job-attempts.js';
import { RegistryWorkerAdmission } from './link/worker-admission.js';
import { WorkerLinkServer } from './link/worker-link-server.js';
import { JobOrchestratorMetrics } from './observability/job-orchestrator-metrics.js';
import { SessionPool } from './sessions/session-pool.js';
import { SessionOpenBudget } from './sessions/session-open-budget.js';
import { WorkerReputation } from './sessions/worker-reputation.js';
import { SessionRecovery } from './sessions/session-recovery.js';

/**
 * How long what a call holds (its session's busy lock) outlives the call: renewed every third of it while
 * the call lives, so a replica that dies frees its sessions within it (as its calls' running marks).
 */
const SESSION_HOLD_TTL_MS = 15_000;

export interface JobOrchestratorPorts {
  readonly config: JobOrchestratorConfig;
  readonly store: Store;
  readonly bus: EventBus;
  readonly chain: ChainClient;
  readonly provider: JsonRpcProvider;
  readonly chainId: bigint;
  /** First block of the deployment: where the keeper's log cursor starts on its very first run. */
  readonly deploymentBlock: number;
  readonly logger: Logger;
  readonly replicaId?: string;
  /** The payment-settler, on a server that takes per-call payments. */
  readonly settler?: PaymentSettlerClient;
  /** Where its metrics are registered (the process's registry); default a registry of their own. */
  readonly metrics?: Registry;
}

/** The orchestrator's parts: the worker link, and (with a signer) completions and the job keeper. */
export interface JobOrchestratorParts {
  readonly linkServer: WorkerLinkServer;
  readonly catalogue: ModelCatalogue;
  readonly metrics: JobOrchestratorMetrics;
  /** Undefined without a service signer: every completion is then 503 `not_configured`. */
  readonly completions:
    | {
        readonly runner: CompletionRunner;
        readonly keeper: JobKeeper;
        readonly chain: ServiceChain;
        /** Records lifecycle events in the outbox; stopped after the runner and keeper. */
        readonly lifecycle: LifecyclePublisher;
        /** Hands the outbox to the bus; started with the keeper, stopped last. */
        readonly lifecycleRelay: LifecycleRelay;
      }
    | undefined;
}

/** What stopping completions takes: each part's stop, in `stopCompletions`' order. */
export interface StoppingCompletions {
  readonly runner: Pick<CompletionRunner, 'drain'>;
  readonly keeper: Pick<JobKeeper, 'stop'>;
  readonly lifecycle: Pick<LifecyclePublisher, 'stop'>;
  readonly lifecycleRelay: Pick<LifecycleRelay, 'stop'>;
}

/** The part of a stop's time kept for the lifecycle events once the calls drained: a third, at most 10 s. */
export function lifecycleStopShareMs(timeoutMs: number): number {
  return Math.min(10_000, Math.floor(timeoutMs / 3));
}

/**
 * Stops completions within one deadline, `timeoutMs` (DRAIN_TIMEOUT) from now (the relay frees its turn
 * in at most a second more): the calls in progress get all of it but the lifecycle events' share
 * (`lifecycleStopShareMs`), and the job keeper its current round within the same time; then the events
 * still being recorded, then the relay's last passes, share what is left. Whatever is left then is
 * another replica's: calls' jobs the keeper's, outbox events the relay's; an event not even recorded is
 * logged in full at error level.
 */
export async function stopCompletions(
  completions: StoppingCompletions,
  timeoutMs: number,
  logger: Logger,
): Promise<void> {
  const deadline = new Deadline(timeoutMs);
  const calls = new Deadline(timeoutMs - lifecycleStopShareMs(timeoutMs));
  const left = await completions.runner.drain(calls.remainingMs);
  if (left > 0)
    logger.warn({ calls: left }, 'stopping with calls in progress; the job keeper takes their jobs over');
  // The keeper's round may publish events: waited for until the calls' time is up (a second at least).
  const keeperStopped = await waitAtMost(
    completions.keeper.stop(),
    Math.min(deadline.remainingMs, Math.max(calls.remainingMs, 1_000)),
  ).catch((error: unknown) => {
    logger.warn({ err: error }, 'the job keeper did not stop cleanly');
    return true;
  });
  if (!keeperStopped) logger.warn('the job keeper is still in its round; stopping without waiting for it');
  // Nothing publishes any more: what is recorded goes out now, the rest waits in the store.
  await completions.lifecycle.stop(deadline.remainingMs);
  await completions.lifecycleRelay.stop(deadline.remainingMs);
}

/** The worker link server over the chain's registries and the shared store. */
export function buildWorkerLinkServer(
  ports: Omit<JobOrchestratorPorts, 'bus' | 'provider' | 'deploymentBlock'>,
): WorkerLinkServer {
  const { config, store, chain, chainId, logger } = ports;
  return new WorkerLinkServer({
    chainId,
    jobRegistry: chain.addresses.jobRegistry,
    orchestrator: config.LINK_ORCHESTRATOR_NAME,
    heartbeatIntervalMs: config.LINK_HEARTBEAT_INTERVAL,
    presenceTtlMs: config.LINK_PRESENCE_TTL,
    challengeTtlMs: config.LINK_CHALLENGE_TTL,
    admission: new RegistryWorkerAdmission(chain, config.LINK_WORKER_STATUS_CACHE_TTL),
    attempts: new HandedOverJobs(new RegistryJobAttempts(chain), store.values),
    store,
    logger,
    ...(ports.replicaId ? { replicaId: ports.replicaId } : {}),
  });
}

/**
 * Builds every part; `verifyServiceAccounts` must pass before completions are served. Nothing here
 * touches the network.
 */
export function buildJobOrchestrator(ports: JobOrchestratorPorts): JobOrchestratorParts {
  const { config, store, bus, chain, provider, chainId, logger } = ports;
  const replicaId = ports.replicaId ?? randomUUID();
  const linkServer = buildWorkerLinkServer({ ...ports, replicaId });
  const catalogue = new ModelCatalogue(chain, linkServer, config.CHAIN_CACHE_TTL);
  const metrics = new JobOrchestratorMetrics(ports.metrics, () => linkServer.live(), {
    events: () => lifecycleOutboxEvents(store),
    oldestAgeSeconds: () => lifecycleOutboxOldestAgeSeconds(store),
  });
  if (!config.SERVICE_SIGNER_PRIVATE_KEY) return { linkServer, catalogue, metrics, completions: undefined };

  const principal = new Wallet(config.SERVICE_SIGNER_PRIVATE_KEY, provider);
  const operators = (keys: readonly string[]): SendingAccount[] =>
    keys.map((key) => new Wallet(key, provider));
  const blobLane = operators(config.BLOB_OPERATOR_PRIVATE_KEYS);
  const plainLane =
    config.PLAIN_OPERATOR_PRIVATE_KEYS.length > 0
      ? operators(config.PLAIN_OPERATOR_PRIVATE_KEYS)
      : [principal];
  const sender = new TransactionSender({
    provider,
    nonces: store.nonces,
    journal: new StoreSentTransactionJournal(store),
    lanes: new OperatorLanes({ blob: blobLane, plain: plainLane }),
    maxFeePerBlobGas: config.MAX_FEE_PER_BLOB_GAS,
    pollIntervalMs: config.TX_POLL_INTERVAL,
    replaceAfterMs: config.TX_REPLACE_AFTER,
  });
  const waiting = new WaitingCalls();
  const serviceChain = new ServiceChain(chain, sender, principal.address, metrics, {
    lingerMs: config.SUBMIT_BATCH_LINGER,
    mayLinger: () => waiting.count > config.SUBMIT_BATCH_LINGER_SIBLINGS,
    maxWaitMs: config.SUBMIT_BATCH_MAX_WAIT,
    maxCalls: config.SUBMIT_BATCH_MAX_JOBS,
  });
  const lifecycleRelay = new LifecycleRelay(store, bus, logger, {
    replicaId,
    batchSize: config.LIFECYCLE_RELAY_BATCH_SIZE,
    pollIntervalMs: config.LIFECYCLE_RELAY_POLL_INTERVAL,
  });
  const lifecycle = new LifecyclePublisher(store, logger, {
    maxEvents: config.LIFECYCLE_OUTBOX_MAX_EVENTS,
    onQueued: () => lifecycleRelay.wake(),
  });
  const jobs = new TrackedJobs(store);
  const pending = new PendingSubmissions(store);
  const recovery = new SessionRecovery({
    store,
    chain: serviceChain,
    workers: linkServer,
    fromBlock: ports.deploymentBlock,
    replicaId,
    idleTtlMs: config.SESSION_IDLE_CLOSE,
    // Two renewals of a call's hold: a live call takes its lost lock again in one, or two when the store
    // was still coming back at the first. A store of this process alone (in-memory) is lost only with the
    // process and its calls: nothing to wait for.
    holdBackMs: store instanceof MemoryStore ? 0 : (2 * SESSION_HOLD_TTL_MS) / 3,
    waitForOtherMs: 10_000,
    logger,
  });
  const sessions = new SessionPool({
    store,
    chain: serviceChain,
    workers: linkServer,
    holdTtlMs: SESSION_HOLD_TTL_MS,
    idleTtlMs: config.SESSION_IDLE_CLOSE,
    affinityTtlMs: config.CONVERSATION_AFFINITY_TTL,
    claimPollIntervalMs: config.SESSION_CLAIM_POLL_INTERVAL,
    slotHoldMs: 2 * config.LINK_HEARTBEAT_INTERVAL,
    recovery,
    opens: new SessionOpenBudget(store, {
      opensPerMinute: config.SESSION_OPENS_PER_MINUTE,
      unpaidOpensPerMinute: config.SESSION_OPENS_UNPAID_PER_MINUTE,
      perPayer: config.SESSION_UNUSED_PER_WALLET,
      perKey: config.SESSION_UNUSED_PER_KEY,
      closeAfterMs: config.SESSION_UNUSED_CLOSE,
      // A wallet that paid for a job counts as paying for a day.
      paidMarkTtlMs: 24 * 3_600_000,
    }),
    reputation: new WorkerReputation(store, {
      backoffMs: config.WORKER_FAILURE_BACKOFF,
      maxBackoffMs: config.WORKER_FAILURE_BACKOFF_MAX,
      recordTtlMs: 24 * 3_600_000,
    }),
    trialSessions: config.WORKER_TRIAL_SESSIONS,
    logger,
  });
  const warmer = new SessionWarmer({
    pool: sessions,
    workers: linkServer,
    catalogue,
    store,
    owner: principal.address,
    spare: config.SESSION_WARM_SPARE,
    logger,
  });
  const relay = new AnswerRelay({
    frames: store.frames,
    readJob: (jobId) => chain.getJob(jobId),
    readCommitment: (job) => chain.commitmentOf(job),
    chainNow: () => serviceChain.now(),
    pollIntervalMs: config.JOB_POLL_INTERVAL,
    finalGraceMs: config.FINAL_ANSWER_GRACE,
    frameStreamTtlMs: config.FRAME_STREAM_TTL,
    logger,
  });
  const runner = new CompletionRunner({
    payments: new PaymentPaths({
      chain: serviceChain,
      chainId,
      perCall: ports.settler ? new PerCallSettlement(ports.settler, config.MAX_FEE_PER_BLOB_GAS) : undefined,
      lifecycle,
      settlementOutcomeWaitMs: config.SETTLEMENT_OUTCOME_WAIT,
      replyKeys: new ReplyKeyEscrow(store, getBytes(principal.privateKey)),
      pending,
      unconfirmed: new UnconfirmedFees(store),
    }),
    chain: serviceChain,
    chainId,
    catalogue,
    sessions,
    relay,
    warmer,
    workers: linkServer,
    handovers: new HandedOverJobs(new RegistryJobAttempts(chain), store.values),
    jobs,
    lifecycle,
    enabled: config.COMPLETIONS_ENABLED,
    // A replica that dies leaves its jobs to the keeper this soon.
    runMarkTtlMs: 15_000,
    metrics,
    waiting,
    logger,
  });
  const keeper = new JobKeeper({
    store,
    chain: serviceChain,
    jobs,
    lifecycle,
    replicaId,
    intervalMs: config.KEEPER_INTERVAL,
    fromBlock: ports.deploymentBlock,
    confirmations: config.KEEPER_CONFIRMATIONS,
    idleCloseSeconds: Math.ceil(config.SESSION_IDLE_CLOSE / 1000),
    unusedCloseSeconds: Math.ceil(config.SESSION_UNUSED_CLOSE / 1000),
    releaseBatchSize: 50,
    recovery,
    pending,
    warmer,
    metrics,
    logger,
  });
  return {
    linkServer,
    catalogue,
    metrics,
    completions: { runner, keeper, chain: serviceChain, lifecycle, lifecycleRelay },
  };
}

/**
 * Start-up check of the service's accounts: every operator accepted the principal's offer, and the idle
 * close comes before the chain lets anyone close a session. Throws naming exactly what is missing.
 */
export async function verifyServiceAccounts(
  config: JobOrchestratorConfig,
  serviceChain: ServiceChain,
): Promise<void> {
  const problems: string[] = [];
  if (config.BLOB_OPERATOR_PRIVATE_KEYS.length === 0)
    problems.push('BLOB_OPERATOR_PRIVATE_KEYS is empty: job submissions need at least one blob operator');
  const keys = [...config.BLOB_OPERATOR_PRIVATE_KEYS, ...config.PLAIN_OPERATOR_PRIVATE_KEYS];
  const reads = serviceChain.reads;
  for (const key of keys) {
    const operator = new Wallet(key).address;
    const principal = await reads.principalOf(operator);
    if (principal.toLowerCase() === serviceChain.principal.toLowerCase()) continue;
    const offered = await reads.jobRegistry.isOperatorOffered(serviceChain.principal, operator);
    problems.push(
      offered
        ? `operator ${operator} has an offer from the principal ${serviceChain.principal} but has not accepted it: send acceptOperator(${serviceChain.principal}) from ${operator}`
        : `operator ${operator} is not an operator of the principal ${serviceChain.principal}: send setOperator(${operator}, true) from the principal, then acceptOperator(${serviceChain.principal}) from ${operator}`,
    );
  }
  const { inactivityTimeoutSeconds } = await reads.parameters();
  if (config.SESSION_IDLE_CLOSE / 1000 >= inactivityTimeoutSeconds)
    problems.push(
      `SESSION_IDLE_CLOSE (${config.SESSION_IDLE_CLOSE / 1000} s) must be shorter than JobRegistry's inactivity timeout (${inactivityTimeoutSeconds} s)`,
    );
  if (problems.length > 0)
    throw new Error(`the job-orchestrator's service accounts are not ready:\n  ${problems.join('\n  ')}`);
}
