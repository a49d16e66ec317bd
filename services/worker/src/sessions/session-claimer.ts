import {
  chainTimeNow,
  ContractRevertError,
  SessionKeyPair,
  SessionState,
  type ChainClient,
} from '@svc/chain';
import type { Logger } from '@svc/platform';
import type { WorkerTransactions } from '../chain/worker-transactions.js';
import type { SessionKeyVault } from './session-key-vault.js';

export type ClaimOutcome =
  | 'claimed'
  | 'already-held'
  | 'not-claimable'
  | 'model-not-served'
  | 'session-limit'
  | 'claim-window-closing'
  | 'draining';

export interface SessionClaimerOptions {
  readonly chain: ChainClient;
  readonly transactions: WorkerTransactions;
  readonly vault: SessionKeyVault;
  readonly worker: string;
  /** Model ids (keccak256 of the names) this worker serves. */
  readonly modelIds: readonly string[];
  /** Most sessions held open at once (announced in heartbeats). */
  readonly sessionLimit: number;
  /** A claim that could be mined only this close to the claim deadline is not sent. */
  readonly claimMarginSeconds: number;
  readonly logger: Logger;
}

/**
 * Claims the sessions opened for this worker, each with a fresh P-256 key stored in the vault
 * before its public half goes on chain, up to the session limit; forgets a session's key when it
 * closes.
 */
export class SessionClaimer {
  readonly #options: SessionClaimerOptions;
  readonly #modelIds: Set<string>;
  /** Sessions claimed or being claimed; a slot is taken before the first await so claims never overshoot. */
  readonly #held = new Set<bigint>();
  #draining = false;

  private constructor(options: SessionClaimerOptions, held: readonly bigint[]) {
    this.#options = options;
    this.#modelIds = new Set(options.modelIds.map((id) => id.toLowerCase()));
    for (const sessionId of held) this.#held.add(sessionId);
  }

  /** Resumes with the vault's sessions, dropping the keys of sessions that closed while it was down. */
  static async resume(options: SessionClaimerOptions): Promise<SessionClaimer> {
    const held: bigint[] = [];
    for (const sessionId of await options.vault.sessionIds()) {
      const session = await options.chain.getSession(sessionId);
      const ours = session.worker.toLowerCase() === options.worker.toLowerCase();
      const live = session.state === SessionState.Open || session.state === SessionState.Active;
      if (ours && live) held.push(sessionId);
      else await options.vault.forget(sessionId);
    }
    return new SessionClaimer(options, held);
  }

  get heldSessions(): number {
    return this.#held.size;
  }

  get freeSessionSlots(): number {
    return this.#draining ? 0 : Math.max(this.#options.sessionLimit - this.#held.size, 0);
  }

  /** Sessions claimed or being claimed, in id order. */
  get heldSessionIds(): bigint[] {
    return [...this.#held].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  holds(sessionId: bigint): boolean {
    return this.#held.has(sessionId);
  }

  /** Claims nothing new from now on (graceful drain). */
  drain(): void {
    this.#draining = true;
  }

  async claim(sessionId: bigint): Promise<ClaimOutcome> {
    if (this.#held.has(sessionId)) return 'already-held';
    if (this.#draining) return 'draining';
    if (this.#held.size >= this.#options.sessionLimit) return 'session-limit';
    this.#held.add(sessionId);
    let keyStored = false;
    try {
      const outcome = await this.#claimHeld(sessionId, () => (keyStored = true));
      if (outcome !== 'claimed') this.#held.delete(sessionId);
      return outcome;
    } catch (error) {
      this.#held.delete(sessionId);
      throw error;
    } finally {
      if (keyStored && !this.#held.has(sessionId)) await this.#options.vault.forget(sessionId);
    }
  }

  /** The session closed on chain: forget its key for good. */
  async release(sessionId: bigint): Promise<void> {
    this.#held.delete(sessionId);
    await this.#options.vault.forget(sessionId);
  }

  async #claimHeld(sessionId: bigint, onKeyStored: () => void): Promise<ClaimOutcome> {
    const { chain, worker, logger } = this.#options;
    const session = await chain.getSession(sessionId);
    if (session.state !== SessionState.Open || session.worker.toLowerCase() !== worker.toLowerCase()) {
      return 'not-claimable';
    }
    if (!this.#modelIds.has(session.modelId.toLowerCase())) return 'model-not-served';
    const now = await chainTimeNow(chain.provider);
    if (now + this.#options.claimMarginSeconds > session.claimDeadline) return 'claim-window-closing';

    const keyPair = SessionKeyPair.generate();
    // Stored before the claim: a crash after the claim is mined must not lose the session's key.
    await this.#options.vault.put(sessionId, keyPair);
    onKeyStored();
    try {
      await this.#options.transactions.claimSession(sessionId, keyPair.publicKey);
    } catch (error) {
      if (!(error instanceof ContractRevertError)) throw error;
      logger.info({ sessionId: sessionId.toString(), revert: error.revert.name }, 'session claim refused');
      return 'not-claimable';
    }
    logger.info({ sessionId: sessionId.toString() }, 'session claimed');
    return 'claimed';
  }
}
