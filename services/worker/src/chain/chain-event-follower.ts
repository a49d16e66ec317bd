import { ProtocolLogCursor, type ProtocolEvent } from '@svc/chain';
import type { Logger } from '@svc/platform';
import type { Provider } from 'ethers';
import { readFileIfExists, writeFileDurably } from '../storage/durable-file.js';

/** What the worker does with the chain's news; each returns when that piece of work is done. */
export interface ChainEventHandlers {
  sessionOpened(sessionId: bigint): Promise<void>;
  sessionClosed(sessionId: bigint): Promise<void>;
  jobAssigned(jobId: bigint, sessionId: bigint, blockNumber: number): Promise<void>;
}

export interface ChainEventFollowerOptions {
  readonly provider: Provider;
  readonly addresses: { readonly jobRegistry: string; readonly workerRegistry: string };
  readonly chainId: bigint;
  readonly worker: string;
  /** Where the next block to read is kept across restarts. */
  readonly cursorPath: string;
  /** First block when no cursor is stored. */
  readonly fromBlock: number;
  readonly confirmations: number;
  readonly pollIntervalMs: number;
  readonly handlers: ChainEventHandlers;
  readonly logger: Logger;
}

interface StoredCursor {
  chainId: string;
  jobRegistry: string;
  nextBlock: number;
}

const FOLLOWED_EVENTS = ['SessionOpened', 'SessionClosed', 'JobSubmitted', 'JobReassigned'] as const;

/**
 * Follows JobRegistry's logs for this worker's sessions and jobs. The stored cursor never passes
 * the block of work still in flight, so after a crash that work is read again and redone
 * (every handler checks the chain before acting, so a second delivery is harmless).
 */
export class ChainEventFollower {
  readonly #options: ChainEventFollowerOptions;
  readonly #worker: string;
  readonly #inFlight = new Map<number, number>();
  /** The handlers' work still running, each with the cursor save that follows it. */
  readonly #handling = new Set<Promise<void>>();
  #cursor: ProtocolLogCursor | undefined;
  #timer: NodeJS.Timeout | undefined;
  #polling: Promise<void> | undefined;
  #stopped = false;
  #persisting: Promise<void> = Promise.resolve();

  constructor(options: ChainEventFollowerOptions) {
    this.#options = options;
    this.#worker = options.worker.toLowerCase();
  }

  async start(): Promise<void> {
    const stored = await this.#readStoredCursor();
    this.#cursor = new ProtocolLogCursor({
      provider: this.#options.provider,
      addresses: this.#options.addresses,
      fromBlock: stored ?? this.#options.fromBlock,
      confirmations: this.#options.confirmations,
      events: FOLLOWED_EVENTS,
    });
    this.#schedule(0);
  }

  /** Stops reading; work already handed to the handlers goes on (`settled` waits for it). */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.#polling;
  }

  /**
   * Resolves once the work handed to the handlers has ended and the cursor it moved is saved, so a
   * stopped worker writes nothing more to its data folder.
   */
  async settled(): Promise<void> {
    while (this.#handling.size > 0) await Promise.all([...this.#handling]);
    await this.#persisting.catch(() => {});
  }

  /** Reads and dispatches every confirmed batch available now (tests call it to step the follower). */
  async pollOnce(): Promise<void> {
    const cursor = this.#cursor;
    if (!cursor) throw new Error('the follower has not started');
    for (let batch = await cursor.next(); batch; batch = await cursor.next()) {
      for (const event of batch.events) this.#dispatch(event);
      await this.#persist();
    }
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#polling = this.pollOnce()
        .catch((error: unknown) => this.#options.logger.warn({ err: error }, 'reading chain logs failed'))
        .finally(() => this.#schedule(this.#options.pollIntervalMs));
    }, delayMs);
  }

  #dispatch(event: ProtocolEvent): void {
    const { handlers } = this.#options;
    switch (event.name) {
      case 'SessionOpened':
        if (event.args.worker.toLowerCase() === this.#worker) {
          this.#track(event.blockNumber, handlers.sessionOpened(event.args.sessionId));
        }
        return;
      case 'SessionClosed':
        this.#track(event.blockNumber, handlers.sessionClosed(event.args.sessionId));
        return;
      case 'JobSubmitted':
        if (event.args.worker.toLowerCase() === this.#worker) {
          this.#track(
            event.blockNumber,
            handlers.jobAssigned(event.args.jobId, event.args.sessionId, event.blockNumber),
          );
        }
        return;
      case 'JobReassigned':
        if (event.args.worker.toLowerCase() === this.#worker) {
          this.#track(
            event.blockNumber,
            handlers.jobAssigned(event.args.jobId, event.args.newSessionId, event.blockNumber),
          );
        }
        return;
      default:
        return;
    }
  }

  #track(blockNumber: number, work: Promise<void>): void {
    this.#inFlight.set(blockNumber, (this.#inFlight.get(blockNumber) ?? 0) + 1);
    const handled = work
      .catch((error: unknown) =>
        this.#options.logger.error({ err: error, blockNumber }, 'chain event handling failed'),
      )
      .then(() => {
        const left = (this.#inFlight.get(blockNumber) ?? 1) - 1;
        if (left > 0) this.#inFlight.set(blockNumber, left);
        else this.#inFlight.delete(blockNumber);
        return this.#persist().catch((error: unknown) =>
          this.#options.logger.warn({ err: error }, 'saving the chain cursor failed'),
        );
      })
      .finally(() => this.#handling.delete(handled));
    this.#handling.add(handled);
  }

  /** Writes one at a time, each with the newest position, so an older one never lands last. */
  #persist(): Promise<void> {
    this.#persisting = this.#persisting.catch(() => {}).then(() => this.#write());
    return this.#persisting;
  }

  async #write(): Promise<void> {
    const cursor = this.#cursor;
    if (!cursor) return;
    const nextBlock = Math.min(cursor.nextBlock, ...this.#inFlight.keys());
    const stored: StoredCursor = {
      chainId: this.#options.chainId.toString(),
      jobRegistry: this.#options.addresses.jobRegistry.toLowerCase(),
      nextBlock,
    };
    await writeFileDurably(this.#options.cursorPath, JSON.stringify(stored));
  }

  async #readStoredCursor(): Promise<number | undefined> {
    const json = await readFileIfExists(this.#options.cursorPath);
    if (json === undefined) return undefined;
    const stored = JSON.parse(json) as StoredCursor;
    // A cursor of another chain or deployment means nothing here.
    const same =
      stored.chainId === this.#options.chainId.toString() &&
      stored.jobRegistry === this.#options.addresses.jobRegistry.toLowerCase();
    return same ? stored.nextBlock : undefined;
  }
}
