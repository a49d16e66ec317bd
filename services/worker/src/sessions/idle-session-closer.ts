import { chainTimeNow, SessionState, type ChainClient } from '@svc/chain';
import { sleepUnlessAborted, type Logger } from '@svc/platform';
import type { WorkerTransactions } from '../chain/worker-transactions.js';
import type { SessionClaimer } from './session-claimer.js';

export interface IdleSessionCloserOptions {
  readonly chain: ChainClient;
  readonly transactions: WorkerTransactions;
  readonly claimer: SessionClaimer;
  /** Whether a running job still uses the session (it keeps the key until the job is done). */
  readonly inUse: (sessionId: bigint) => boolean;
  readonly intervalMs: number;
  readonly logger: Logger;
}

/**
 * Frees the slots of sessions nobody uses any more. The service that opened a session normally closes it
 * when it sits idle; a service that lost its records (a restart on an in-memory store, a Redis flush)
 * never will, and the worker would hold those slots for good. So the worker closes, itself, every session
 * it holds that the chain says has been idle past JobRegistry's inactivity timeout, and forgets the keys of
 * sessions that closed without it noticing.
 */
export class IdleSessionCloser {
  readonly #options: IdleSessionCloserOptions;
  readonly #abort = new AbortController();
  #loop: Promise<void> | undefined;

  constructor(options: IdleSessionCloserOptions) {
    this.#options = options;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  async stop(): Promise<void> {
    this.#abort.abort();
    await this.#loop;
  }

  /** One pass over the held sessions; returns the ids it closed or forgot. Exposed for tests. */
  async sweep(): Promise<bigint[]> {
    const { chain, transactions, claimer, inUse, logger } = this.#options;
    const { inactivityTimeoutSeconds } = await chain.parameters();
    const now = await chainTimeNow(chain.provider);
    const freed: bigint[] = [];
    for (const sessionId of claimer.heldSessionIds) {
      if (inUse(sessionId)) continue;
      const session = await chain.getSession(sessionId);
      // Claimed by this worker and not closed: held on purpose unless it sat idle past the timeout.
      if (session.state === SessionState.Active) {
        if (now <= session.lastActivityAt + inactivityTimeoutSeconds) continue;
        try {
          await transactions.closeSession(sessionId);
        } catch (error) {
          logger.warn({ err: error, sessionId: sessionId.toString() }, 'idle session not closed');
          continue;
        }
        logger.info({ sessionId: sessionId.toString() }, 'closed a session idle past the inactivity timeout');
      } else if (session.state === SessionState.Open) {
        continue; // being claimed now
      }
      await claimer.release(sessionId);
      freed.push(sessionId);
    }
    return freed;
  }

  async #run(): Promise<void> {
    const signal = this.#abort.signal;
    for (;;) {
      await sleepUnlessAborted(this.#options.intervalMs, signal);
      if (signal.aborted) return;
      try {
        await this.sweep();
      } catch (error) {
        this.#options.logger.warn({ err: error }, 'idle session sweep failed; trying again next round');
      }
    }
  }
}
