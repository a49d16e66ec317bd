import { chainTimeNow, ContractRevertError, JobState, type ChainClient } from '@svc/chain';
import type { Logger } from '@svc/platform';
import type { WorkerTransactions } from '../chain/worker-transactions.js';
import { readFileIfExists, writeFileDurably } from '../storage/durable-file.js';

export interface EarningsCollectorOptions {
  readonly chain: ChainClient;
  readonly transactions: WorkerTransactions;
  readonly worker: string;
  /** File of the completed jobs not yet released, kept across restarts. */
  readonly path: string;
  /** Earnings are withdrawn once they reach this much. */
  readonly withdrawThresholdWei: bigint;
  /** Most jobs per `releaseJobs` call. */
  readonly maxBatch?: number;
  readonly logger: Logger;
}

export interface CollectionReport {
  readonly released: readonly bigint[];
  readonly withdrawnWei: bigint;
}

/**
 * Turns completed jobs into money: once a job's dispute window passed it is released (its fee
 * becomes this worker's earnings), and earnings past a threshold are withdrawn.
 */
export class EarningsCollector {
  readonly #options: EarningsCollectorOptions;
  readonly #unreleased = new Set<bigint>();
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> = Promise.resolve();

  private constructor(options: EarningsCollectorOptions, unreleased: readonly bigint[]) {
    this.#options = options;
    for (const jobId of unreleased) this.#unreleased.add(jobId);
  }

  static async open(options: EarningsCollectorOptions): Promise<EarningsCollector> {
    const json = await readFileIfExists(options.path);
    const stored = json === undefined ? [] : (JSON.parse(json) as string[]).map((id) => BigInt(id));
    return new EarningsCollector(options, stored);
  }

  get unreleasedJobs(): readonly bigint[] {
    return [...this.#unreleased];
  }

  async noteCompleted(jobId: bigint): Promise<void> {
    if (this.#unreleased.has(jobId)) return;
    this.#unreleased.add(jobId);
    await this.#save();
  }

  start(intervalMs: number): void {
    this.#timer = setInterval(() => {
      this.#running = this.collect().catch((error: unknown) =>
        this.#options.logger.warn({ err: error }, 'collecting earnings failed'),
      );
    }, intervalMs);
  }

  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    await this.#running;
  }

  /** Releases every ripe job and withdraws earnings past the threshold. */
  async collect(): Promise<CollectionReport> {
    const { chain, transactions, worker, logger } = this.#options;
    const [now, parameters] = await Promise.all([chainTimeNow(chain.provider), chain.parameters()]);
    const ripe: bigint[] = [];
    for (const jobId of this.#unreleased) {
      const job = await chain.getJob(jobId);
      // Released by someone else, refunded after a dispute, or never ours: nothing left to collect.
      if (job.state !== JobState.Completed || job.worker.toLowerCase() !== worker.toLowerCase()) {
        this.#unreleased.delete(jobId);
      } else if (now >= job.completedAt + parameters.disputeWindowSeconds) {
        ripe.push(jobId);
      }
    }
    const released: bigint[] = [];
    const maxBatch = this.#options.maxBatch ?? 50;
    for (let start = 0; start < ripe.length; start += maxBatch) {
      const batch = ripe.slice(start, start + maxBatch);
      try {
        await transactions.releaseJobs(batch);
        released.push(...batch);
      } catch (error) {
        if (!(error instanceof ContractRevertError)) throw error;
        // One job in the batch moved on meanwhile; the next round sorts it out one by one.
        logger.info({ revert: error.revert.name }, 'releasing jobs refused');
      }
    }
    for (const jobId of released) this.#unreleased.delete(jobId);
    await this.#save();

    let withdrawnWei = 0n;
    const earnings = await chain.earningsOf(worker);
    if (earnings > 0n && earnings >= this.#options.withdrawThresholdWei) {
      await transactions.withdrawEarnings();
      withdrawnWei = earnings;
      logger.info({ withdrawnWei: earnings.toString() }, 'earnings withdrawn');
    }
    return { released, withdrawnWei };
  }

  async #save(): Promise<void> {
    await writeFileDurably(this.#options.path, JSON.stringify([...this.#unreleased].map(String)));
  }
}
