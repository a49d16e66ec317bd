import type { Logger } from '@svc/platform';
import type { ChainEventHandlers } from '../chain/chain-event-follower.js';
import type { LinkHintHandlers } from '../link/worker-link.js';
import type { SessionClaimer } from '../sessions/session-claimer.js';
import type { JobScheduler } from './job-scheduler.js';

/**
 * Where news of work arrives, from the chain's logs and from the link's hints alike: sessions to
 * claim, sessions closed, jobs to run. A closed session's key outlives the close until its running
 * jobs are done with it.
 */
export class WorkIntake {
  readonly #claimer: SessionClaimer;
  readonly #scheduler: JobScheduler;
  readonly #logger: Logger;
  readonly #closedWhileInUse = new Set<bigint>();

  constructor(claimer: SessionClaimer, scheduler: JobScheduler, logger: Logger) {
    this.#claimer = claimer;
    this.#scheduler = scheduler;
    this.#logger = logger;
  }

  /** Handlers for the chain follower: each resolves once its work is done. */
  get fromChain(): ChainEventHandlers {
    return {
      sessionOpened: async (sessionId) => {
        const outcome = await this.#claimer.claim(sessionId);
        this.#logger.debug({ sessionId: sessionId.toString(), outcome }, 'session opened for this worker');
      },
      sessionClosed: async (sessionId) => {
        if (this.#claimer.holds(sessionId)) await this.#releaseIfUnused(sessionId);
      },
      jobAssigned: async (jobId, sessionId, blockNumber) => {
        await this.#scheduler.submit({ jobId, sessionId, blockNumber }, sessionId);
        if (this.#closedWhileInUse.has(sessionId)) await this.#releaseIfUnused(sessionId);
      },
    };
  }

  /** Handlers for the link's hints: each says at once whether the worker takes the work on. */
  get fromLink(): LinkHintHandlers {
    return {
      // Hints only save polling: the claimer and the runner check the chain before acting.
      sessionOpened: async (sessionId) => {
        const outcome = await this.#claimer.claim(sessionId);
        return outcome === 'claimed' || outcome === 'already-held';
      },
      jobSubmitted: async (jobId, sessionId, blockNumber) => {
        if (this.#scheduler.freeJobSlots === 0) return false;
        void this.fromChain.jobAssigned(jobId, sessionId, blockNumber);
        return true;
      },
    };
  }

  async #releaseIfUnused(sessionId: bigint): Promise<void> {
    if (this.#scheduler.usesSession(sessionId)) {
      this.#closedWhileInUse.add(sessionId);
      return;
    }
    this.#closedWhileInUse.delete(sessionId);
    await this.#claimer.release(sessionId);
  }
}
