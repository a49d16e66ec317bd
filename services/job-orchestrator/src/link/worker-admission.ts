import type { ChainClient } from '@svc/chain';

/** Whether an address may link: an active registered worker in WorkerRegistry. */
export interface WorkerAdmission {
  isActiveWorker(worker: string): Promise<boolean>;
}

/**
 * WorkerRegistry's `isActive`, remembered briefly per address: a worker redialling in a loop costs one
 * chain read per TTL, and a deregistration is noticed within the TTL.
 */
export class RegistryWorkerAdmission implements WorkerAdmission {
  readonly #chain: Pick<ChainClient, 'isWorkerActive'>;
  readonly #ttlMs: number;
  readonly #remembered = new Map<string, { active: Promise<boolean>; untilMs: number }>();

  constructor(chain: Pick<ChainClient, 'isWorkerActive'>, ttlMs: number) {
    this.#chain = chain;
    this.#ttlMs = ttlMs;
  }

  isActiveWorker(worker: string): Promise<boolean> {
    const key = worker.toLowerCase();
    const now = Date.now();
    const known = this.#remembered.get(key);
    if (known && known.untilMs > now) return known.active;
    this.#forgetLapsed(now);
    const active = this.#chain.isWorkerActive(worker);
    // A failed read is not remembered: the next dial asks again.
    active.catch(() => this.#remembered.delete(key));
    this.#remembered.set(key, { active, untilMs: now + this.#ttlMs });
    return active;
  }

  #forgetLapsed(now: number): void {
    for (const [key, entry] of this.#remembered) if (entry.untilMs <= now) this.#remembered.delete(key);
  }
}
