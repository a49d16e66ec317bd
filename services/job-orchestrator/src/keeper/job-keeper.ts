import { JobState, ProtocolLogCursor, SessionState, type ProtocolEvent } from '@svc/chain';
import { sleepUnlessAborted, type Logger, type Store } from '@svc/platform';
import type { ServiceChain } from '../chain/service-chain.js';
import { JobLifecycleKind, type LifecyclePublisher } from '../events/lifecycle-events.js';
import type { JobOrchestratorMetrics, KeeperAction } from '../observability/job-orchestrator-metrics.js';
import {
  OPEN_SESSIONS_GROUP,
  heldBackUntil,
  parseOpenSession,
  sessionBusyKey,
  sessionPoolGroup,
} from '../sessions/session-records.js';
import type { SessionRecovery } from '../sessions/session-recovery.js';
import type { SessionWarmer } from '../sessions/session-warmer.js';
import type { PendingSubmissions } from './pending-submissions.js';
import type { TrackedJob, TrackedJobs } from './tracked-jobs.js';

export interface JobKeeperOptions {
  readonly store: Pick<Store, 'locks' | 'values' | 'presence' | 'concurrency'>;
  readonly chain: ServiceChain;
  readonly jobs: TrackedJobs;
  readonly lifecycle: LifecyclePublisher;
  /** Identifies this replica in the leader lock. */
  readonly replicaId: string;
  readonly intervalMs: number;
  /** First block to read when no cursor is stored (the deployment block). */
  readonly fromBlock: number;
  readonly confirmations: number;
  /** An Active session idle this long (chain time) is closed, well before anyone may close it. */
  readonly idleCloseSeconds: number;
  /** A session in which no job was ever submitted is closed after this long (SESSION_UNUSED_CLOSE). */
  readonly unusedCloseSeconds: number;
  /** Most jobs per `releaseJobs` transaction. */
  readonly releaseBatchSize: number;
  /** Rebuilds the list of open sessions from the chain when the store lost it, so idle ones still close. */
  readonly recovery: Pick<SessionRecovery, 'ensure'>;
  /** Keeps spare sessions ready; topped up every round, so also right after a start. */
  readonly warmer?: Pick<SessionWarmer, 'round'>;
  /** Submissions whose calls could not tell whether they landed: adopted when their job appears. */
  readonly pending?: Pick<PendingSubmissions, 'take'>;
  readonly metrics: JobOrchestratorMetrics;
  readonly logger: Logger;
}

const LEADER_LOCK = 'keeper:leader';
const CURSOR_KEY = 'keeper:cursor';
/** The stored cursor outlives any outage worth surviving; it is rewritten every batch. */
const CURSOR_TTL_MS = 365 * 24 * 3_600_000;

/**
 * Drives every job the service submitted to a terminal state, whichever replica served it and whether or
 * not that replica is still alive, and closes idle sessions (their list rebuilt from the chain when the
 * store lost it, `SessionRecovery`). One replica leads at a time (a store lock renewed every round), so two
 * replicas never send the same transaction.
 *
 * It follows JobRegistry's logs from a cursor kept in the store, turning how tracked jobs ended into
 * lifecycle events (released: the answer is paid for, whoever saw it; refunded; disputed), and sweeps the tracked
 * jobs for what time makes due: timing out overdue jobs, refunding failed ones, releasing completed ones
 * after the dispute window (batched with `releaseJobs`). A job a live call is running is left to it.
 */
export class JobKeeper {
  readonly #options: JobKeeperOptions;
  readonly #abort = new AbortController();
  #loop: Promise<void> | undefined;
  #cursor: ProtocolLogCursor | undefined;

  constructor(options: JobKeeperOptions) {
    this.#options = options;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#loop;
    await this.#options.store.locks.release(LEADER_LOCK, this.#options.replicaId).catch(() => false);
  }

  /** One round, when this replica leads: logs first, then the sweep. Exposed for tests. */
  async round(): Promise<boolean> {
    const { store, replicaId, intervalMs } = this.#options;
    const lock = await store.locks.tryAcquire(LEADER_LOCK, replicaId, intervalMs * 3);
    if (!lock.acquired) {
      this.#cursor = undefined; // another replica moves the stored cursor meanwhile
      return false;
    }
    await this.#followLogs();
    await this.#sweepJobs();
    await this.#options.recovery.ensure();
    await this.#sweepSessions();
    await this.#options.warmer?.round();
    return true;
  }

  async #run(): Promise<void> {
    const signal = this.#abort.signal;
    while (!signal.aborted) {
      try {
        this.#options.metrics.keeperRound((await this.round()) ? 'led' : 'not_leader');
      } catch (error) {
        this.#options.metrics.keeperRound('failed');
        this.#options.logger.warn({ err: error }, 'job keeper round failed; trying again next round');
      }
      await sleepUnlessAborted(this.#options.intervalMs, signal);
    }
  }

  async #followLogs(): Promise<void> {
    const { store, chain, confirmations, fromBlock } = this.#options;
    if (!this.#cursor) {
      const stored = await store.values.get(CURSOR_KEY);
      this.#cursor = new ProtocolLogCursor({
        provider: chain.provider,
        addresses: chain.reads.addresses,
        fromBlock: stored === null ? fromBlock : Number(stored),
        confirmations,
        events: ['JobReleased', 'JobRefunded', 'JobDisputed', 'DebitSettled', 'JobSubmitted'],
      });
    }
    for (;;) {
      const before = this.#cursor.nextBlock;
      const batch = await this.#cursor.next();
      if (!batch) return;
      try {
        const tracked = new Map((await this.#options.jobs.list()).map((job) => [job.jobId, job]));
        for (const event of batch.events) await this.#onEvent(event, tracked);
      } catch (error) {
        this.#cursor = undefined; // re-read from the stored position next round
        throw error;
      }
      await store.values.set(CURSOR_KEY, String(this.#cursor.nextBlock), CURSOR_TTL_MS);
      if (this.#cursor.nextBlock === before) return;
    }
  }

  async #onEvent(event: ProtocolEvent, trackedJobs: ReadonlyMap<bigint, TrackedJob>): Promise<void> {
    const { jobs, lifecycle } = this.#options;
    if (!('jobId' in event.args)) return;
    const jobId = event.args.jobId as bigint;
    if (event.name === 'DebitSettled') {
      if (!trackedJobs.has(jobId)) await this.#adoptSettlement(jobId, event.args.payer);
      return;
    }
    if (event.name === 'JobSubmitted') {
      if (!trackedJobs.has(jobId)) await this.#adoptSubmission(event);
      return;
    }
    const tracked = trackedJobs.get(jobId);
    if (!tracked) return;
    const step = { jobId, txHash: event.transactionHash };
    switch (event.name) {
      case 'JobReleased': {
        const fee = event.args.workerShare + event.args.protocolShare;
        // The fee is paid out: the call is spent whether or not its answer reached the caller.
        await lifecycle.publish(tracked.call, JobLifecycleKind.ANSWERED, { ...step, feeWei: fee });
        await lifecycle.publish(tracked.call, JobLifecycleKind.RELEASED, { ...step, feeWei: fee });
        await jobs.forget(jobId);
        return;
      }
      case 'JobRefunded':
        await lifecycle.publish(tracked.call, JobLifecycleKind.REFUNDED, {
          ...step,
          feeWei: event.args.amount,
        });
        await jobs.forget(jobId);
        return;
      case 'JobDisputed':
        await lifecycle.publish(tracked.call, JobLifecycleKind.DISPUTED, step);
        await jobs.forget(jobId);
        return;
      default:
        return;
    }
  }

  /**
   * A per-call settlement in one of the service's sessions that no call tracks: its call never heard it
   * land (the settler could not be reached, or the replica died). Tracked here, the sweep times it out
   * and refunds the payer like any job whose call is gone.
   */
  async #adoptSettlement(jobId: bigint, payer: string): Promise<void> {
    const { chain, jobs, logger } = this.#options;
    const job = await chain.reads.getJob(jobId);
    const session = await chain.reads.getSession(job.sessionId);
    if (session.owner.toLowerCase() !== chain.principal.toLowerCase()) return;
    // A call that is still serving it tracks it itself, a moment after the settlement's receipt.
    if (await jobs.isRunning(jobId)) return;
    await jobs.track(
      jobId,
      {
        reservationId: `settlement-${jobId}`,
        requestId: '',
        paymentPath: 'prepaid_debit',
        payer,
        keyId: '',
        model: '',
      },
      // Awaiting its answer with no call to take it: refunded once answered, unless a resend of the
      // payment is given the answer first (it tracks the job itself then).
      job.state === JobState.Submitted ? { orphan: true } : {},
    );
    // Still awaiting its answer, no call will serve it: worth a warning. Answered already (a restart with
    // an in-memory store forgets the calls' tracking), it only awaits its release.
    if (job.state === JobState.Submitted)
      logger.warn({ jobId: jobId.toString(), payer }, 'keeper adopted a settled job no call tracks');
    else
      logger.info(
        { jobId: jobId.toString(), payer },
        'keeper tracks an answered settled job until its release',
      );
  }

  /**
   * A submission whose call could not tell whether it landed (it gave up, its job held by nothing): tracked
   * under the call's identity, so the job's end settles the call's spend hold. Its call ended `job_failed`,
   * so an answer to it reaches nobody: it is refunded as undelivered, never counted as spent.
   */
  async #adoptSubmission(event: Extract<ProtocolEvent, { name: 'JobSubmitted' }>): Promise<void> {
    const { jobs, lifecycle, logger, pending } = this.#options;
    if (!pending) return;
    const call = await pending.take({
      promptBlobHash: String(event.args.promptBlobHash),
      promptIndex: Number(event.args.promptIndex),
    });
    if (!call) return;
    const { jobId, sessionId, worker, fee } = event.args;
    await jobs.track(jobId, call, { undelivered: true });
    await lifecycle.publish(call, JobLifecycleKind.SUBMITTED, {
      jobId,
      sessionId,
      attempt: 1,
      txHash: event.transactionHash,
      worker,
      feeWei: fee,
    });
    logger.warn({ jobId: jobId.toString() }, 'keeper adopted a submission its call never heard land');
  }

  async #sweepJobs(): Promise<void> {
    const { chain, jobs, lifecycle, logger, releaseBatchSize, metrics } = this.#options;
    const [tracked, now, parameters] = await Promise.all([
      jobs.list(),
      chain.now(),
      chain.reads.parameters(),
    ]);
    const releasable: bigint[] = [];
    for (const { jobId, call, undelivered, orphan, answered } of tracked) {
      if (await jobs.isRunning(jobId)) continue;
      const job = await chain.reads.getJob(jobId);
      let action: KeeperAction | undefined;
      try {
        if (job.state === JobState.Submitted && now > job.deadline) {
          action = 'timeout';
          await chain.timeoutJob(jobId);
          logger.info({ jobId: jobId.toString() }, 'keeper timed out an overdue job');
        } else if (job.state === JobState.Failed) {
          action = 'refund';
          await lifecycle.publish(call, JobLifecycleKind.FAILED, { jobId, failureCode: 'job_failed' });
          await chain.refundJob(jobId);
          logger.info({ jobId: jobId.toString() }, 'keeper refunded a failed job');
        } else if (
          job.state === JobState.Completed &&
          now <= job.completedAt + parameters.disputeWindowSeconds &&
          (undelivered || (orphan && now > job.completedAt + parameters.disputeWindowSeconds / 2))
        ) {
          // Its answer never reached the caller: refunded (JobRefunded then publishes REFUNDED).
          action = 'refund';
          await chain.refundUndelivered(jobId);
          logger.info({ jobId: jobId.toString() }, 'keeper refunded an undelivered job');
        } else if (
          job.state === JobState.Completed &&
          now <= job.completedAt + parameters.disputeWindowSeconds &&
          !undelivered &&
          !orphan &&
          !answered
        ) {
          // Completed, no call serves it and nothing refunds it: it is released and paid. Its call's own
          // ANSWERED may never have gone out (the replica stopped or died, the run failed after the
          // commitment): committed now, not held until the release a dispute window later (idempotent).
          await lifecycle.publish(call, JobLifecycleKind.ANSWERED, { jobId, feeWei: job.fee });
          await jobs.track(jobId, call, { answered: true });
        } else if (
          job.state === JobState.Completed &&
          now > job.completedAt + parameters.disputeWindowSeconds
        ) {
          releasable.push(jobId);
        } else if (job.state === JobState.Released || job.state === JobState.Refunded) {
          // Ended before it was tracked here (or its event was missed): the logs have published it.
          await jobs.forget(jobId);
        }
        if (action) metrics.keeperActed(action, 'done');
      } catch (error) {
        if (action) metrics.keeperActed(action, 'failed');
        logger.warn({ err: error, jobId: jobId.toString() }, 'keeper could not advance a job');
      }
    }
    for (let start = 0; start < releasable.length; start += releaseBatchSize) {
      const batch = releasable.slice(start, start + releaseBatchSize);
      try {
        await chain.releaseJobs(batch);
      } catch (error) {
        metrics.keeperActed('release', 'failed', batch.length);
        throw error;
      }
      metrics.keeperActed('release', 'done', batch.length);
      logger.info({ jobs: batch.map(String) }, 'keeper released completed jobs');
    }
  }

  async #sweepSessions(): Promise<void> {
    const { store, chain, idleCloseSeconds, unusedCloseSeconds, logger, metrics } = this.#options;
    const now = await chain.now();
    for (const entry of await store.presence.list(OPEN_SESSIONS_GROUP)) {
      const sessionId = BigInt(entry.member);
      // A session held by a call is busy, not idle; one just recovered may be too (`heldBackUntil`).
      const record = parseOpenSession(entry.value);
      if (record && heldBackUntil(record) !== undefined) continue;
      if ((await store.locks.holder(sessionBusyKey(sessionId))) !== null) continue;
      const session = await chain.reads.getSession(sessionId);
      // A session no job was ever submitted in (its caller left, or never paid) is closed early.
      const unusedLeases = record?.unusedLeases;
      const closeAfter = unusedLeases ? Math.min(unusedCloseSeconds, idleCloseSeconds) : idleCloseSeconds;
      const idle =
        (session.state === SessionState.Active && now - session.lastActivityAt > closeAfter) ||
        (session.state === SessionState.Open && now > session.claimDeadline);
      if (session.state !== SessionState.Closed && !idle) continue;
      await store.presence.withdraw(sessionPoolGroup(session.owner, session.modelId), entry.member);
      if (session.state !== SessionState.Closed) {
        try {
          await chain.closeSession(sessionId);
          metrics.keeperActed('close_session', 'done');
          logger.info({ sessionId: entry.member }, 'keeper closed an idle session');
        } catch (error) {
          metrics.keeperActed('close_session', 'failed');
          logger.warn({ err: error, sessionId: entry.member }, 'keeper could not close a session');
          continue;
        }
      }
      await store.presence.withdraw(OPEN_SESSIONS_GROUP, entry.member);
      // Its payer's and key's budget of unused sessions gets the slot back.
      for (const lease of unusedLeases ?? []) await store.concurrency.release(lease.key, lease.leaseId);
    }
  }
}
