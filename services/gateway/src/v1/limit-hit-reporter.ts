import { randomUUID } from 'node:crypto';
import {
  LIMIT_HITS_TALLY,
  limitHitField,
  MemoryStore,
  type LimitHitKind,
  type Logger,
  type Tallies,
} from '@svc/platform';
import type { KeyServiceClient } from '../key-service-client.js';
import { deliverLimitHits, type LimitHitDeliverySettings } from './limit-hit-batches.js';

export type KeyLimit = 'rate' | 'concurrency' | 'spendCap' | 'sessionOpens';

const TALLY_KINDS: Record<KeyLimit, LimitHitKind> = {
  rate: 'rate',
  concurrency: 'concurrency',
  spendCap: 'spend_cap',
  sessionOpens: 'session_opens',
};

export interface LimitHitReporterOptions {
  /**
   * Where refusals are counted: the shared store's tallies, so any replica's flush delivers them. Default: a
   * tally of this process only (a unit under test).
   */
  readonly tallies?: Tallies;
  /** How often `start` delivers the tally to the key-service (default 5 s). */
  readonly flushIntervalMs?: number;
  /** How long a claimed batch is kept from other replicas; default 30 s, beyond one key-service call. */
  readonly claimTtlMs?: number;
  /** Most keys × limits waiting in this process for the store (default 10,000); see `report`. */
  readonly maxUnsent?: number;
}

const DEFAULT_FLUSH_INTERVAL_MS = 5_000;
const DEFAULT_CLAIM_TTL_MS = 30_000;
const DEFAULT_MAX_UNSENT = 10_000;
const MAX_BATCH_ENTRIES = 1_000;
const MAX_BATCHES_PER_FLUSH = 10;

/**
 * Counts refusals in the key's `limitHits` (spec: each refusal increments the matching counter) without a
 * database write per refusal: a refusal is one atomic increment of the store's tally, and a periodic flush
 * sends the tally's aggregate to the key-service as one call per batch (see limit-hit-batches.ts). A
 * refusal is answered once its count is in the store (`report` resolves then), so a listing the caller asks
 * for next shows it: the key-service adds what the tally holds, not yet applied, to the keys it lists.
 * Failures are logged, never answered to the caller: `report` never rejects.
 */
export class LimitHitReporter {
  readonly #tallies: Tallies;
  /** The store of this process, when none was given: closed on `stop`. */
  readonly #ownStore: MemoryStore | undefined;
  readonly #flushIntervalMs: number;
  readonly #delivery: LimitHitDeliverySettings;
  readonly #maxUnsent: number;
  /** Counts per tally field not yet in the store: bounded by keys × limits, not by refusals. */
  #unsent = new Map<string, number>();
  /** The one write of unsent counts in progress (it picks up counts reported meanwhile). */
  #writing: Promise<boolean> | undefined;
  /** Settled once the counts now in `#unsent` reached the store, or their write failed: what `report` returns. */
  #nextWrite: PendingWrite | undefined;
  /** Fields of the store write in flight: they come back to `#unsent` if it fails, so they count to the bound. */
  #fieldsInFlight = 0;
  /** Refusals left uncounted since the store last took a write (only while it cannot be written). */
  #droppedSinceWritten = 0;
  #flushes: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #running = false;

  constructor(
    private readonly keyService: KeyServiceClient,
    private readonly logger: Logger,
    options: LimitHitReporterOptions = {},
  ) {
    this.#flushIntervalMs = options.flushIntervalMs ?? DEFAULT_FLUSH_INTERVAL_MS;
    if (!Number.isSafeInteger(this.#flushIntervalMs) || this.#flushIntervalMs < 1) {
      throw new RangeError(
        `the limit-hit flush interval must be at least 1 ms, got ${this.#flushIntervalMs}`,
      );
    }
    this.#ownStore = options.tallies === undefined ? new MemoryStore() : undefined;
    this.#tallies = options.tallies ?? (this.#ownStore as MemoryStore).tallies;
    this.#maxUnsent = options.maxUnsent ?? DEFAULT_MAX_UNSENT;
    this.#delivery = {
      claimant: `gateway-${randomUUID()}`,
      claimTtlMs: options.claimTtlMs ?? DEFAULT_CLAIM_TTL_MS,
      maxEntries: MAX_BATCH_ENTRIES,
      maxBatches: MAX_BATCHES_PER_FLUSH,
    };
  }

  /**
   * Counts one refusal. It goes into an aggregate, delivered under the aggregate's batch id. Refusals that arrive while a store write is under way are added up here
   * and written together, so a flood costs one increment per key and limit per store round trip, and at
   * most `maxUnsent` keys × limits wait here (memory stays bounded, whatever the flood). Only when the
   * store cannot be written and that many are waiting is the refusal of yet another key left uncounted
   * (and logged).
   *
   * Resolves once the count is in the store, within the store write that follows the one in progress (two
   * round trips at most), so the refusal answered after it is listed at once; also when the store refused
   * the write (the count waits here for the next one) or the refusal was left uncounted. Never rejects.
   */
  report(keyId: string, limit: KeyLimit): Promise<void> {
    if (keyId === '') return Promise.resolve();
    const field = limitHitField(TALLY_KINDS[limit], keyId);
    const waiting = this.#unsent.get(field);
    if (waiting === undefined && this.#unsent.size + this.#fieldsInFlight >= this.#maxUnsent) {
      if (this.#droppedSinceWritten === 0) {
        this.logger.error(
          { maxUnsent: this.#maxUnsent },
          'limit hits are not reaching the store; refusals of further keys are not counted',
        );
      }
      this.#droppedSinceWritten += 1;
      return Promise.resolve();
    }
    this.#unsent.set(field, (waiting ?? 0) + 1);
    this.#nextWrite ??= settledOnce();
    const { written } = this.#nextWrite;
    void this.#writeUnsent();
    return written;
  }

  /**
   * Writes the counts waiting here to the store, then delivers the store's tally to the key-service.
   * Flushes run one at a time; this one resolves after every report made before it was called.
   */
  flush(): Promise<void> {
    const run = this.#flushes.then(async () => {
      await this.#writeUnsent();
      try {
        await deliverLimitHits(this.#tallies, this.keyService, this.#delivery, this.logger);
      } catch (error) {
        this.logger.warn({ err: error }, 'could not deliver limit hits; retrying at the next flush');
      }
    });
    this.#flushes = run;
    return run;
  }

  /** Flushes every `flushIntervalMs` until `stop`. */
  start(): void {
    if (this.#running) return;
    this.#running = true;
    this.#schedule();
  }

  /** Stops the schedule and flushes once more, so this replica's last refusals are not left waiting. */
  async stop(): Promise<void> {
    this.#running = false;
    clearTimeout(this.#timer);
    await this.flush();
    await this.#ownStore?.close();
    if (this.#unsent.size > 0 || this.#droppedSinceWritten > 0) {
      this.logger.error(
        { unsentKeys: this.#unsent.size, dropped: this.#droppedSinceWritten },
        'stopped with limit hits that never reached the store',
      );
    }
  }

  #schedule(): void {
    if (!this.#running) return;
    this.#timer = setTimeout(() => {
      void this.flush().finally(() => this.#schedule());
    }, this.#flushIntervalMs);
    this.#timer.unref();
  }

  /** Resolves true once nothing is waiting here, false when the store refused a write (retried later). */
  #writeUnsent(): Promise<boolean> {
    if (this.#writing) return this.#writing;
    if (this.#unsent.size === 0) return Promise.resolve(true);
    const writing = this.#writeWhileWaiting().finally(() => {
      this.#writing = undefined;
    });
    this.#writing = writing;
    return writing;
  }

  /** The reports waiting for the counts now in `#unsent`; later ones wait for the write after. */
  #takeNextWrite(): PendingWrite | undefined {
    const next = this.#nextWrite;
    this.#nextWrite = undefined;
    return next;
  }

  async #writeWhileWaiting(): Promise<boolean> {
    while (this.#unsent.size > 0) {
      const writing = [...this.#unsent];
      this.#unsent = new Map();
      const reporters = this.#takeNextWrite();
      this.#fieldsInFlight = writing.length;
      const results = await Promise.allSettled(
        writing.map(([field, count]) => this.#tallies.add(LIMIT_HITS_TALLY, field, count)),
      );
      this.#fieldsInFlight = 0;
      reporters?.settle();
      const failed = writing.filter((_, index) => results[index]?.status === 'rejected');
      if (failed.length > 0) {
        // No write follows until the next refusal or flush: refusals reported meanwhile are answered now.
        this.#takeNextWrite()?.settle();
        // Kept for the next write (at the next refusal or flush); they were within the bound already.
        for (const [field, count] of failed) this.#unsent.set(field, (this.#unsent.get(field) ?? 0) + count);
        const rejection = results.find((result) => result.status === 'rejected');
        this.logger.warn(
          { err: rejection?.reason, waiting: this.#unsent.size },
          'could not count limit hits in the store',
        );
        return false;
      }
    }
    if (this.#droppedSinceWritten > 0) {
      this.logger.warn({ dropped: this.#droppedSinceWritten }, 'limit hits reach the store again');
      this.#droppedSinceWritten = 0;
    }
    return true;
  }
}

/** A store write that reports wait for: `written` settles when `settle` is called. */
interface PendingWrite {
  readonly written: Promise<void>;
  readonly settle: () => void;
}

function settledOnce(): PendingWrite {
  let settle!: () => void;
  const written = new Promise<void>((resolve) => {
    settle = resolve;
  });
  return { written, settle };
}
