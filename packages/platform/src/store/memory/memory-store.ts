import type { EpochMs, Store } from '../store.js';
import { requirePositiveInteger } from '../validation.js';
import { MemoryChannels } from './channels.js';
import { MemoryConcurrencyLeases } from './concurrency-leases.js';
import { MemoryCounters } from './counters.js';
import { MemoryExclusiveLocks } from './exclusive-locks.js';
import { MemoryExpiringValues } from './expiring-values.js';
import { MemoryFrameStreams } from './frame-streams.js';
import { MemoryLifecycle } from './memory-context.js';
import { MemoryNonceAllocator } from './nonces.js';
import { MemoryPresence } from './presence.js';
import { MemoryQueues } from './queues.js';
import { MemoryRateWindows } from './rate-windows.js';
import { MemoryRevocationMarkers } from './revocations.js';
import { MemoryTallies } from './tallies.js';

const DEFAULT_SWEEP_INTERVAL_MS = 30_000;

export interface MemoryStoreOptions {
  /** The store's clock (default `Date.now`); tests may drive expiries with their own. */
  readonly clock?: () => EpochMs;
  /** How often lapsed entries nobody reads again are dropped, bounding memory. Default 30 s. */
  readonly sweepIntervalMs?: number;
}

/**
 * The embedded store for the all-in-one mode (no REDIS_URL): same semantics as RedisStore within one
 * process. Every operation runs to completion synchronously before its promise settles, which is what
 * makes each one atomic here. Services of one process must share one instance to share state.
 */
export class MemoryStore implements Store {
  readonly rateWindows: MemoryRateWindows;
  readonly concurrency: MemoryConcurrencyLeases;
  readonly locks: MemoryExclusiveLocks;
  readonly values: MemoryExpiringValues;
  readonly counters: MemoryCounters;
  readonly tallies: MemoryTallies;
  readonly frames: MemoryFrameStreams;
  readonly queues: MemoryQueues;
  readonly presence: MemoryPresence;
  readonly nonces: MemoryNonceAllocator;
  readonly revocations: MemoryRevocationMarkers;
  readonly channels: MemoryChannels;

  readonly #lifecycle: MemoryLifecycle;
  readonly #sweepTimer: NodeJS.Timeout;

  constructor(options: MemoryStoreOptions = {}) {
    const sweepIntervalMs = options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    requirePositiveInteger('sweepIntervalMs', sweepIntervalMs);
    this.#lifecycle = new MemoryLifecycle(options.clock ?? Date.now);
    this.rateWindows = new MemoryRateWindows(this.#lifecycle);
    this.concurrency = new MemoryConcurrencyLeases(this.#lifecycle);
    this.locks = new MemoryExclusiveLocks(this.#lifecycle);
    this.values = new MemoryExpiringValues(this.#lifecycle);
    this.counters = new MemoryCounters(this.#lifecycle);
    this.tallies = new MemoryTallies(this.#lifecycle);
    this.frames = new MemoryFrameStreams(this.#lifecycle);
    this.queues = new MemoryQueues(this.#lifecycle);
    this.presence = new MemoryPresence(this.#lifecycle);
    this.nonces = new MemoryNonceAllocator(this.#lifecycle);
    this.revocations = new MemoryRevocationMarkers(this.#lifecycle, this.rateWindows);
    this.channels = new MemoryChannels(this.#lifecycle);
    this.#sweepTimer = setInterval(() => this.sweep(), sweepIntervalMs);
    // Housekeeping must not keep a process alive that has nothing else to do.
    this.#sweepTimer.unref();
  }

  /** Drops every lapsed entry now (also runs on a timer). */
  sweep(): void {
    const now = this.#lifecycle.now();
    this.rateWindows.sweep(now);
    this.concurrency.sweep(now);
    this.locks.sweep(now);
    this.values.sweep(now);
    this.counters.sweep(now);
    this.frames.sweep(now);
    this.presence.sweep(now);
  }

  async ping(): Promise<void> {
    this.#lifecycle.assertOpen('ping');
  }

  async close(): Promise<void> {
    if (this.#lifecycle.closed) return;
    this.#lifecycle.close();
    clearInterval(this.#sweepTimer);
    this.frames.close();
    this.channels.close();
  }
}
