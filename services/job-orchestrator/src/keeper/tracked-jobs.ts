import { renewWhileHeld, type Store } from '@svc/platform';
import type { CallIdentity } from '../events/lifecycle-events.js';

/** A job the service submitted and has not seen to a terminal state yet. */
export interface TrackedJob {
  readonly jobId: bigint;
  readonly call: CallIdentity;
  /** Completed on chain but its answer never reached the caller: to refund (`refundUndelivered`). */
  readonly undelivered?: boolean;
  /**
   * A per-call settlement no call was serving when it landed (its call gave up): refunded once Completed,
   * late enough in the dispute window that the payment's resend can still be given its answer first.
   */
  readonly orphan?: boolean;
  /**
   * Completed, and no call serves it: the keeper published ANSWERED for it (its call's own may never have
   * gone out), so its spend hold is committed now rather than at its release, a dispute window later.
   */
  readonly answered?: boolean;
}

type TrackedFlags = Pick<TrackedJob, 'undelivered' | 'orphan' | 'answered'>;

const TRACKED_JOBS_GROUP = 'jobs:tracked';
/** Far beyond any job's life (timeout, refund grace, dispute window): only a lost entry ever lapses. */
const TRACKED_TTL_MS = 7 * 24 * 3_600_000;

/**
 * The service's jobs in the shared store, written when a job is submitted and dropped when it is
 * released or refunded, so the keeper of any replica can drive them to the end and tell the key-service
 * which reservation each one settles. The call that runs a job holds its `running` lock; the keeper
 * leaves a job alone while that lock is held.
 */
export class TrackedJobs {
  constructor(private readonly store: Pick<Store, 'presence' | 'locks'>) {}

  async track(jobId: bigint, call: CallIdentity, flags: TrackedFlags = {}): Promise<void> {
    await this.store.presence.announce(
      TRACKED_JOBS_GROUP,
      jobId.toString(),
      JSON.stringify({ ...call, ...flags }),
      TRACKED_TTL_MS,
    );
  }

  /** Marks a tracked job Completed but undelivered: the keeper refunds it within the dispute window. */
  async markUndelivered(jobId: bigint, call: CallIdentity): Promise<void> {
    await this.track(jobId, call, { undelivered: true });
  }

  async forget(jobId: bigint): Promise<void> {
    await this.store.presence.withdraw(TRACKED_JOBS_GROUP, jobId.toString());
  }

  async list(): Promise<TrackedJob[]> {
    const entries = await this.store.presence.list(TRACKED_JOBS_GROUP);
    const jobs: TrackedJob[] = [];
    for (const entry of entries) {
      try {
        const { undelivered, orphan, answered, ...call } = JSON.parse(entry.value) as CallIdentity &
          TrackedFlags;
        jobs.push({
          jobId: BigInt(entry.member),
          call,
          ...(undelivered ? { undelivered } : {}),
          ...(orphan ? { orphan } : {}),
          ...(answered ? { answered } : {}),
        });
      } catch {
        // Not ours to parse: skip it rather than stall the keeper.
      }
    }
    return jobs;
  }

  /**
   * Marks the job as run by `holder` (a call) while the call lives: the mark lasts `ttlMs` and is renewed
   * every third of it, so a replica that dies leaves the job to the keeper within `ttlMs`.
   */
  async holdRun(jobId: bigint, holder: string, ttlMs: number): Promise<{ end(): Promise<void> }> {
    const key = runningKey(jobId);
    await this.store.locks.tryAcquire(key, holder, ttlMs);
    const renewal = renewWhileHeld(ttlMs, () => this.store.locks.renew(key, holder, ttlMs));
    return {
      end: async () => {
        renewal.stop();
        await this.store.locks.release(key, holder);
      },
    };
  }

  async isRunning(jobId: bigint): Promise<boolean> {
    return (await this.store.locks.holder(runningKey(jobId))) !== null;
  }
}

function runningKey(jobId: bigint): string {
  return `jobs:running:${jobId}`;
}
