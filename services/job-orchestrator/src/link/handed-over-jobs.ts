import type { ExpiringValues } from '@svc/platform';
import type { CurrentAttempt, JobAttempts } from './job-attempts.js';

/**
 * How long a hand-over is remembered: far beyond the worker's bound of blocks for an unconfirmed job
 * (5 blocks, a minute at 12 s), after which the job is on chain (and the chain answers) or given up.
 */
const HANDOVER_TTL_MS = 10 * 60_000;

function handoverKey(jobId: bigint): string {
  return `jobs:handed-over:${jobId}`;
}

/**
 * Jobs handed to their session's worker before inclusion (`pending_job`, docs/protocol.md, Starting before
 * inclusion), kept in the shared store: the worker's link may be on another replica, whose frame intake
 * must take the job's frames before the chain names the job. Once the job is on chain the chain decides
 * (its current worker and attempt), so a record never outranks a reassignment.
 */
export class HandedOverJobs implements JobAttempts {
  constructor(
    private readonly onChain: JobAttempts,
    private readonly values: Pick<ExpiringValues, 'set' | 'get'>,
  ) {}

  /** Records a submission handed to `worker` in `sessionId`: its first attempt's frames are taken from now. */
  async record(
    jobId: bigint,
    handover: { readonly worker: string; readonly sessionId: bigint },
  ): Promise<void> {
    const value = JSON.stringify({ worker: handover.worker, sessionId: handover.sessionId.toString() });
    await this.values.set(handoverKey(jobId), value, HANDOVER_TTL_MS);
  }

  async currentAttempt(jobId: bigint): Promise<CurrentAttempt | undefined> {
    const current = await this.onChain.currentAttempt(jobId);
    if (current) return current;
    return this.#handedOver(jobId);
  }

  /**
   * Whether `worker` may send frames of `attempt` now, without a chain read when the job was handed to it
   * (its first attempt's frames, the ones that stream before and just after inclusion): a read per frame
   * would put a round trip to the node on every delta's way. Any other frame asks the chain.
   */
  async attemptFor(jobId: bigint, worker: string, attempt: number): Promise<CurrentAttempt | undefined> {
    if (attempt === 1) {
      const handedOver = await this.#handedOver(jobId);
      if (handedOver?.worker.toLowerCase() === worker.toLowerCase()) return handedOver;
    }
    return this.currentAttempt(jobId);
  }

  async #handedOver(jobId: bigint): Promise<CurrentAttempt | undefined> {
    const recorded = await this.values.get(handoverKey(jobId));
    if (!recorded) return undefined;
    const { worker, sessionId } = JSON.parse(recorded) as { worker: string; sessionId: string };
    return { worker, attempt: 1, sessionId: BigInt(sessionId) };
  }
}
