import { join } from 'node:path';
import { ChainEventFollower } from './chain/chain-event-follower.js';
import { connectWorkerChain, type WorkerChain } from './chain/worker-chain.js';
import { EarningsCollector } from './earnings/earnings-collector.js';
import { WorkerMetrics } from './health/worker-metrics.js';
import { silentAnswerChannel, type AnswerChannel } from './jobs/answer-channel.js';
import { FinalAnswerJournal } from './jobs/final-answer-journal.js';
import { DEFAULT_PENDING_JOB_BOUNDS, JobRunner } from './jobs/job-runner.js';
import { JobScheduler } from './jobs/job-scheduler.js';
import { PromptReader } from './jobs/prompt-reader.js';
import { WorkIntake } from './jobs/work-intake.js';
import { WorkerLink } from './link/worker-link.js';
import { ensureWorkerRegistered } from './registration/worker-registration.js';
import { IdleSessionCloser } from './sessions/idle-session-closer.js';
import { SessionClaimer } from './sessions/session-claimer.js';
import { SessionKeyVault } from './sessions/session-key-vault.js';
import type { RunningWorker, WorkerDependencies } from './worker-types.js';

export type {
  RunningWorker,
  WorkerDependencies,
  WorkerLinkSettings,
  WorkerSettings,
  WorkerStatus,
} from './worker-types.js';

/**
 * Builds and starts the worker from injected dependencies: registers (idempotently), resumes its
 * sessions and unfinished final answers, then follows the chain. A step that fails stops what the
 * steps before it started.
 */
export async function startWorker(deps: WorkerDependencies): Promise<RunningWorker> {
  const started: Array<() => Promise<void>> = [];
  try {
    return await startSteps(deps, started);
  } catch (error) {
    for (const stop of started.reverse()) await stop().catch(() => undefined);
    throw error;
  }
}

async function startSteps(
  deps: WorkerDependencies,
  started: Array<() => Promise<void>>,
): Promise<RunningWorker> {
  const { settings, logger } = deps;
  const workerChain: WorkerChain = connectWorkerChain({
    provider: deps.provider,
    wallet: deps.wallet,
    jobRegistryAddress: deps.jobRegistryAddress,
    workerRegistryAddress: deps.workerRegistryAddress,
    pollIntervalMs: Math.max(Math.floor(settings.pollIntervalMs / 4), 10),
  });
  started.push(() => workerChain.close());
  const { chain, transactions, address } = workerChain;
  const chainId = (await deps.provider.getNetwork()).chainId;
  const registration = await ensureWorkerRegistered({
    chain,
    transactions,
    worker: address,
    models: deps.model.models,
    stakeWei: settings.stakeWei,
    logger,
  });

  const vault = await SessionKeyVault.open({
    directory: join(settings.dataDir, 'session-keys'),
    password: deps.password,
    ...(settings.vaultScryptN ? { scryptN: settings.vaultScryptN } : {}),
  });
  const claimer = await SessionClaimer.resume({
    chain,
    transactions,
    vault,
    worker: address,
    modelIds: registration.modelIds,
    sessionLimit: settings.sessionLimit,
    claimMarginSeconds: settings.claimMarginSeconds,
    logger,
  });
  const journal = new FinalAnswerJournal(join(settings.dataDir, 'final-answers'));
  let channel: AnswerChannel = silentAnswerChannel;
  const runner = new JobRunner({
    chain,
    transactions,
    worker: address,
    signer: deps.wallet,
    chainId,
    vault,
    prompts: new PromptReader({
      blobSource: deps.blobSource,
      chainId,
      jobRegistry: chain.addresses.jobRegistry,
      models: deps.model.models,
    }),
    model: deps.model,
    journal,
    channel: () => channel,
    keepUntilAcknowledged: () => channel !== silentAnswerChannel,
    guards: settings.guards,
    coalesceMs: settings.coalesceMs,
    maxDeltaChars: settings.maxDeltaChars,
    // Unconfirmed answers at once: as many as the jobs it runs at once.
    pending: settings.pending ?? { ...DEFAULT_PENDING_JOB_BOUNDS, perLink: settings.capacity },
    logger,
  });
  const earnings = await EarningsCollector.open({
    chain,
    transactions,
    worker: address,
    path: join(settings.dataDir, 'unreleased-jobs.json'),
    withdrawThresholdWei: settings.withdrawThresholdWei,
    logger,
  });
  const metrics = new WorkerMetrics(() => ({
    runningJobs: scheduler.runningJobs,
    freeJobSlots: scheduler.freeJobSlots,
    heldSessions: claimer.heldSessions,
    linkConnected: channel instanceof WorkerLink && channel.connected,
  }));
  const scheduler: JobScheduler = new JobScheduler({
    run: async (assignment, signal, answered) => {
      const outcome = await runner.run(assignment, signal, answered);
      metrics.jobFinished(outcome);
      if (outcome === 'completed') await earnings.noteCompleted(assignment.jobId);
      return outcome;
    },
    refuse: (assignment, reason) => runner.refuse(assignment, reason),
    capacity: settings.capacity,
    logger,
  });
  const intake = new WorkIntake(claimer, scheduler, logger);

  // Answers saved before a restart are committed as they are, never regenerated; together, so their
  // commitments share a transaction.
  await Promise.all(
    (await journal.all())
      .filter((answer) => !answer.committed)
      .map(async (answer) => {
        const outcome = await runner.commit(answer);
        if (outcome === 'completed') await earnings.noteCompleted(answer.jobId);
        logger.info({ jobId: answer.jobId.toString(), outcome }, 'saved final answer recovered');
      }),
  );

  const follower = new ChainEventFollower({
    provider: deps.provider,
    addresses: chain.addresses,
    chainId,
    worker: address,
    cursorPath: join(settings.dataDir, 'chain-cursor.json'),
    fromBlock: settings.fromBlock ?? (await deps.provider.getBlockNumber()),
    confirmations: settings.confirmations,
    pollIntervalMs: settings.pollIntervalMs,
    logger,
    handlers: intake.fromChain,
  });
  await follower.start();
  started.push(() => follower.stop());
  const idleSessions = new IdleSessionCloser({
    chain,
    transactions,
    claimer,
    inUse: (sessionId) => scheduler.usesSession(sessionId),
    intervalMs: settings.sessionSweepIntervalMs,
    logger,
  });
  if (settings.sessionSweepIntervalMs > 0) idleSessions.start();
  started.push(() => idleSessions.stop());
  let draining = false;
  const pendingStop = new AbortController();
  const pendingRuns = new Set<Promise<void>>();
  const link = deps.link
    ? new WorkerLink({
        ...deps.link,
        worker: address,
        signer: deps.wallet,
        chainId,
        jobRegistry: chain.addresses.jobRegistry,
        journal,
        logger,
        offer: () => ({
          models: deps.model.models,
          freeJobSlots: scheduler.freeJobSlots,
          freeSessionSlots: claimer.freeSessionSlots,
          heldSessions: claimer.heldSessionIds,
        }),
        hints: {
          ...intake.fromLink,
          // Started before inclusion; the chain's announcement of the job then joins this run.
          pendingJob: async (offer) => {
            if (draining) return false;
            const taken = await runner.offerPending(offer, pendingStop.signal);
            if (!taken.accepted) return false;
            // Tracked so stop() waits for its earnings record (a save cut short loses a fee to release).
            const settled = taken.outcome
              .then(async (outcome) => {
                metrics.jobFinished(outcome);
                if (outcome === 'completed') await earnings.noteCompleted(offer.jobId);
              })
              .catch((error: unknown) => logger.error({ err: error }, 'pending job could not be handled'))
              .finally(() => pendingRuns.delete(settled));
            pendingRuns.add(settled);
            return true;
          },
        },
      })
    : undefined;
  if (link) {
    channel = link;
    link.start();
  }
  if (settings.releaseIntervalMs > 0) earnings.start(settings.releaseIntervalMs);
  logger.info(
    { worker: address, models: deps.model.models, registration: registration.steps },
    'worker started',
  );

  return {
    address,
    registration,
    journal,
    follower,
    link,
    earnings,
    metrics,
    status: () => ({
      address,
      models: deps.model.models,
      freeJobSlots: scheduler.freeJobSlots,
      freeSessionSlots: claimer.freeSessionSlots,
      runningJobs: scheduler.runningJobs,
      heldSessions: claimer.heldSessions,
      draining,
    }),
    setAnswerChannel: (next: AnswerChannel | undefined) => {
      channel = next ?? silentAnswerChannel;
    },
    drain: async () => {
      draining = true;
      claimer.drain();
      await scheduler.drain();
    },
    idleSessions,
    stop: async () => {
      await idleSessions.stop();
      await follower.stop();
      pendingStop.abort(new Error('the worker is stopping'));
      await scheduler.abort();
      await Promise.all(pendingRuns);
      await follower.settled();
      await earnings.stop();
      await link?.stop();
      await workerChain.close();
    },
  };
}
