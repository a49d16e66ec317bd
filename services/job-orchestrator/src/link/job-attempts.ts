import type { ChainClient } from '@svc/chain';

/** Who may send frames for a job now: its current worker, attempt and session on chain. */
export interface CurrentAttempt {
  readonly worker: string;
  readonly attempt: number;
  readonly sessionId: bigint;
}

export interface JobAttempts {
  /** undefined when the job is not on chain (not submitted, or not seen yet). */
  currentAttempt(jobId: bigint): Promise<CurrentAttempt | undefined>;
  /**
   * The attempt `worker`'s frame of `attempt` is judged against: the current one, unless the source knows
   * better without asking the chain (a job handed to this worker before inclusion, `HandedOverJobs`).
   */
  attemptFor(jobId: bigint, worker: string, attempt: number): Promise<CurrentAttempt | undefined>;
}

/** JobRegistry's `getJob`, read per frame check (a reassignment must be seen at once, so no cache). */
export class RegistryJobAttempts implements JobAttempts {
  readonly #chain: Pick<ChainClient, 'getJob'>;

  constructor(chain: Pick<ChainClient, 'getJob'>) {
    this.#chain = chain;
  }

  async currentAttempt(jobId: bigint): Promise<CurrentAttempt | undefined> {
    const job = await this.#chain.getJob(jobId);
    // An unknown id reads as the zero record: attempt 0.
    if (job.attempt === 0) return undefined;
    return { worker: job.worker, attempt: job.attempt, sessionId: job.sessionId };
  }

  attemptFor(jobId: bigint): Promise<CurrentAttempt | undefined> {
    return this.currentAttempt(jobId);
  }
}
