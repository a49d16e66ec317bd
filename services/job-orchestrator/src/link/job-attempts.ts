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
}
