import { randomUUID } from 'node:crypto';
import type { Logger, Store } from '@svc/platform';
import type { ModelCatalogue } from '../completions/model-catalogue.js';
import type { LinkedWorkers } from '../link/worker-link-server.js';
import type { SessionPool } from './session-pool.js';

export interface SessionWarmerOptions {
  readonly pool: Pick<SessionPool, 'idleSessions' | 'openSpare'>;
  readonly workers: Pick<LinkedWorkers, 'live'>;
  readonly catalogue: Pick<ModelCatalogue, 'model'>;
  readonly store: Pick<Store, 'locks'>;
  /** Whose sessions are kept warm: the service's principal, which every call runs its job under. */
  readonly owner: string;
  /** Idle claimed sessions kept per served model (SESSION_WARM_SPARE); 0 switches warming off. */
  readonly spare: number;
  readonly logger: Logger;
}

/** Longer than an open and a claim take (two blocks, plus a claim window's wait at worst). */
const WARMING_LOCK_TTL_MS = 3 * 60_000;

/**
 * Keeps sessions ready before they are needed (docs/architecture.md, Sessions ready before they are
 * needed): every call runs in the service's own sessions, so one pool per model serves every wallet, and
 * keeping `spare` of them idle and claimed means no call waits for `openSession` and `claimSession`, a new
 * wallet's first included. A spare is opened when a call takes a session from the pool and on every keeper
 * round (so also at start), one per model at a time across replicas (a store lock); idle sessions close
 * after SESSION_IDLE_CLOSE, so the pool follows demand down as well as up.
 */
export class SessionWarmer {
  readonly #warming = new Set<string>();
  readonly #holder = `warmer:${randomUUID()}`;

  constructor(private readonly options: SessionWarmerOptions) {}

  /** Tops up the pool of every model a live worker serves; opens run in the background. */
  async round(): Promise<void> {
    if (this.options.spare === 0) return;
    const served = new Set((await this.options.workers.live()).flatMap((worker) => worker.models));
    for (const name of served) {
      const model = await this.options.catalogue.model(name).catch(() => undefined);
      if (model) this.nudge(model.name, model.modelId);
    }
  }

  /** Tops up one model's pool in the background (a call just took a session from it). */
  nudge(model: string, modelId: string): void {
    if (this.options.spare === 0 || this.#warming.has(modelId)) return;
    this.#warming.add(modelId);
    void this.#topUp(model, modelId)
      .catch((error: unknown) =>
        this.options.logger.info(
          { err: error, model },
          'no spare session opened now; next round tries again',
        ),
      )
      .finally(() => this.#warming.delete(modelId));
  }

  async #topUp(model: string, modelId: string): Promise<void> {
    const { pool, store, owner, spare } = this.options;
    const lockKey = `sessions:warming:${owner.toLowerCase()}:${modelId.toLowerCase()}`;
    const holder = this.#holder;
    if (!(await store.locks.tryAcquire(lockKey, holder, WARMING_LOCK_TTL_MS)).acquired) return;
    try {
      while ((await pool.idleSessions(owner, modelId)) < spare) {
        await pool.openSpare({ owner, model, modelId });
      }
    } finally {
      await store.locks.release(lockKey, holder);
    }
  }
}
