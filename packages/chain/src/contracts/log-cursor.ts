import { sleepUnlessAborted } from '@svc/platform';
import type { Provider } from 'ethers';
import {
  decodeProtocolLog,
  protocolEventTopics,
  type ProtocolEvent,
  type ProtocolEventName,
} from './protocol-events.js';

export interface ProtocolLogCursorOptions {
  readonly provider: Provider;
  readonly addresses: { readonly jobRegistry: string; readonly workerRegistry: string };
  /** First block to read (the deployment block, or the block after a stored cursor). */
  readonly fromBlock: number;
  /**
   * Blocks a log must be buried under before it is read. A block this deep is taken as final, so an
   * event is delivered once and never retracted; 0 follows the head (fine on a dev chain only).
   */
  readonly confirmations: number;
  /** Most blocks per `eth_getLogs` (RPC providers cap the range). Default 2,000. */
  readonly maxBlockRange?: number;
  /** Only these events; all of both contracts when omitted. */
  readonly events?: readonly ProtocolEventName[];
}

export interface ProtocolLogBatch {
  readonly fromBlock: number;
  readonly toBlock: number;
  /** In chain order (block, then log index). */
  readonly events: ProtocolEvent[];
}

const DEFAULT_MAX_BLOCK_RANGE = 2_000;

/**
 * Reads the protocol's logs forward in block ranges, never past `head - confirmations`. The caller
 * persists {@link nextBlock} after handling a batch, so a restart resumes without gaps.
 */
export class ProtocolLogCursor {
  readonly #options: ProtocolLogCursorOptions;
  readonly #topics: string[] | undefined;
  #nextBlock: number;

  constructor(options: ProtocolLogCursorOptions) {
    if (!Number.isSafeInteger(options.fromBlock) || options.fromBlock < 0) {
      throw new RangeError(`fromBlock must be a non-negative integer, got ${options.fromBlock}`);
    }
    if (!Number.isSafeInteger(options.confirmations) || options.confirmations < 0) {
      throw new RangeError(`confirmations must be a non-negative integer, got ${options.confirmations}`);
    }
    this.#options = options;
    this.#topics = options.events ? protocolEventTopics(options.events) : undefined;
    this.#nextBlock = options.fromBlock;
  }

  /** The first block the next batch will read. */
  get nextBlock(): number {
    return this.#nextBlock;
  }

  /** The next batch of confirmed logs, or null when no confirmed block is left to read. */
  async next(): Promise<ProtocolLogBatch | null> {
    const head = await this.#options.provider.getBlockNumber();
    const confirmedHead = head - this.#options.confirmations;
    if (confirmedHead < this.#nextBlock) return null;
    const fromBlock = this.#nextBlock;
    const toBlock = Math.min(
      confirmedHead,
      fromBlock + (this.#options.maxBlockRange ?? DEFAULT_MAX_BLOCK_RANGE) - 1,
    );
    const { jobRegistry, workerRegistry } = this.#options.addresses;
    const logs = await this.#options.provider.getLogs({
      address: [jobRegistry, workerRegistry],
      fromBlock,
      toBlock,
      ...(this.#topics ? { topics: [this.#topics] } : {}),
    });
    const events = logs
      .map((log) => decodeProtocolLog(log, this.#options.addresses))
      .filter((event): event is ProtocolEvent => event !== undefined)
      .sort((a, b) => a.blockNumber - b.blockNumber || a.logIndex - b.logIndex);
    this.#nextBlock = toBlock + 1;
    return { fromBlock, toBlock, events };
  }

  /**
   * Reads batches until `signal` aborts, handing each non-empty one to `handle` before moving on
   * (a handler that throws stops the loop with its error, the cursor still before that batch), and
   * sleeping `pollIntervalMs` whenever it has caught up with the confirmed head.
   */
  async follow(
    handle: (batch: ProtocolLogBatch) => Promise<void> | void,
    options: { pollIntervalMs: number; signal: AbortSignal },
  ): Promise<void> {
    while (!options.signal.aborted) {
      const before = this.#nextBlock;
      const batch = await this.next();
      if (batch) {
        try {
          if (batch.events.length > 0) await handle(batch);
        } catch (error) {
          this.#nextBlock = before;
          throw error;
        }
        continue;
      }
      await sleepUnlessAborted(options.pollIntervalMs, options.signal);
    }
  }
}
