import { describe, expect, it } from '@jest/globals';
import { MemoryStore } from '@svc/platform';
import { HandedOverJobs } from '../../src/link/handed-over-jobs.js';
import type { CurrentAttempt, JobAttempts } from '../../src/link/job-attempts.js';

const W = '0x00000000000000000000000000000000000000a1';
const OTHER = '0x00000000000000000000000000000000000000b2';

/** The chain's view, counting its reads: a job is on it once `mine` says so. */
class ChainAttempts implements JobAttempts {
  reads = 0;
  readonly jobs = new Map<bigint, CurrentAttempt>();

  async currentAttempt(jobId: bigint) {
    this.reads += 1;
    return this.jobs.get(jobId);
  }

  attemptFor(jobId: bigint) {
    return this.currentAttempt(jobId);
  }
}

describe('jobs handed over before inclusion', () => {
  it("take the handed-to worker's first-attempt frames before the chain names the job, without reading it", async () => {
    const store = new MemoryStore();
    const chain = new ChainAttempts();
    const handovers = new HandedOverJobs(chain, store.values);
    expect(await handovers.attemptFor(7n, W, 1)).toBeUndefined();
    await handovers.record(7n, { worker: W, sessionId: 3n });
    chain.reads = 0;
    expect(await handovers.attemptFor(7n, W, 1)).toEqual({ worker: W, attempt: 1, sessionId: 3n });
    expect(chain.reads).toBe(0);
    // Anyone else, or another attempt, is judged by the chain.
    expect(await handovers.attemptFor(7n, OTHER, 1)).toEqual({ worker: W, attempt: 1, sessionId: 3n });
    expect(await handovers.attemptFor(7n, W, 2)).toEqual({ worker: W, attempt: 1, sessionId: 3n });
    expect(chain.reads).toBe(2);
    // Once on chain the chain decides: reassigned to another worker, attempt 2 is that worker's.
    chain.jobs.set(7n, { worker: OTHER, attempt: 2, sessionId: 4n });
    expect(await handovers.currentAttempt(7n)).toEqual({ worker: OTHER, attempt: 2, sessionId: 4n });
    expect(await handovers.attemptFor(7n, OTHER, 2)).toEqual({ worker: OTHER, attempt: 2, sessionId: 4n });
    await store.close();
  });
});
