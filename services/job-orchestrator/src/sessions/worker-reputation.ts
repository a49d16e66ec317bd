import type { Store } from '@svc/platform';
import type { LiveWorker } from '../link/worker-presence.js';

/** What the service remembers of a worker across calls and replicas (docs/architecture.md, Worker choice). */
export interface WorkerStanding {
  /** Jobs it answered (a final committed and delivered) within the record's lifetime. */
  readonly answered: number;
  /** Attempts it failed: a job failed or timed out, a session unclaimed, an answer committed but never delivered. */
  readonly failed: number;
  /** Failed lately: new sessions go to it only when no other worker has room. */
  readonly backedOff: boolean;
}

export interface WorkerReputationSettings {
  /** The backoff after one failure; each further failure in a row doubles it. */
  readonly backoffMs: number;
  /** The longest backoff. */
  readonly maxBackoffMs: number;
  /** How long a worker's record of answers and failures lasts (then it is unproven again). */
  readonly recordTtlMs: number;
}

const UNPROVEN: WorkerStanding = { answered: 0, failed: 0, backedOff: false };

function recordKey(worker: string): string {
  return `workers:record:${worker.toLowerCase()}`;
}

function streakKey(worker: string): string {
  return `workers:failure-streak:${worker.toLowerCase()}`;
}

function backoffKey(worker: string): string {
  return `workers:backoff:${worker.toLowerCase()}`;
}

/**
 * Every worker's record of answered and failed jobs and its failure backoff, in the shared store so every
 * replica picks workers by the same record. Free slots are what a worker says of itself; this is what it
 * did. A failure backs the worker off for `backoffMs`, doubled for each failure in a row up to
 * `maxBackoffMs`; an answer ends the streak and the backoff.
 */
export class WorkerReputation {
  constructor(
    private readonly store: Pick<Store, 'counters' | 'values'>,
    private readonly settings: WorkerReputationSettings,
  ) {}

  async answered(worker: string): Promise<void> {
    const { counters, values } = this.store;
    await counters.increment(recordKey(worker), 'answered', 1, { ttlMs: this.settings.recordTtlMs });
    await counters.delete(streakKey(worker));
    await values.delete(backoffKey(worker));
  }

  async failed(worker: string): Promise<void> {
    const { counters, values } = this.store;
    const { backoffMs, maxBackoffMs, recordTtlMs } = this.settings;
    await counters.increment(recordKey(worker), 'failed', 1, { ttlMs: recordTtlMs });
    const streak = await counters.increment(streakKey(worker), 'failures', 1, { ttlMs: recordTtlMs });
    const doublings = Math.min(Number(streak) - 1, 30);
    const ttlMs = Math.min(maxBackoffMs, backoffMs * 2 ** doublings);
    await values.set(backoffKey(worker), streak.toString(), Math.max(1, ttlMs));
  }

  /** Forgets what the worker did: it is unproven again, with no backoff. */
  async forget(worker: string): Promise<void> {
    const { counters, values } = this.store;
    await Promise.all([
      counters.delete(recordKey(worker)),
      counters.delete(streakKey(worker)),
      values.delete(backoffKey(worker)),
    ]);
  }

  /** The standing of each worker named (lowercase addresses as keys). */
  async standings(workers: readonly string[]): Promise<Map<string, WorkerStanding>> {
    const { counters, values } = this.store;
    const entries = await Promise.all(
      workers.map(async (worker): Promise<[string, WorkerStanding]> => {
        const [record, backoff] = await Promise.all([
          counters.get(recordKey(worker)),
          values.get(backoffKey(worker)),
        ]);
        return [
          worker.toLowerCase(),
          {
            answered: Number(record.answered ?? 0n),
            failed: Number(record.failed ?? 0n),
            backedOff: backoff !== null,
          },
        ];
      }),
    );
    return new Map(entries);
  }

  static unproven(): WorkerStanding {
    return UNPROVEN;
  }
}

/**
 * Workers with room for a new session of `model` (`withRoom`, least loaded first), best first: proven (an
 * answered job on record), then unproven, then backed off, keeping the load order within each. `trial`
 * says whether an unproven worker is held to its trial sessions: while a proven worker serves the model.
 */
export function rankWorkers(
  withRoom: readonly LiveWorker[],
  live: readonly LiveWorker[],
  model: string,
  standings: ReadonlyMap<string, WorkerStanding>,
): { candidates: LiveWorker[]; trial: boolean } {
  const standingOf = (worker: LiveWorker) => standings.get(worker.address.toLowerCase());
  const proven = (worker: LiveWorker) => (standingOf(worker)?.answered ?? 0) > 0;
  const tierOf = (worker: LiveWorker) => (standingOf(worker)?.backedOff ? 2 : proven(worker) ? 0 : 1);
  const candidates = withRoom
    .map((worker, order) => ({ worker, order, tier: tierOf(worker) }))
    .sort((a, b) => a.tier - b.tier || a.order - b.order)
    .map((entry) => entry.worker);
  const trial = live.some(
    (worker) => worker.models.includes(model) && proven(worker) && !standingOf(worker)?.backedOff,
  );
  return { candidates, trial };
}
