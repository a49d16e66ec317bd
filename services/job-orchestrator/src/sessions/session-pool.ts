import { setTimeout as sleep } from 'node:timers/promises';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { getBytes } from 'ethers';
import { SessionState } from '@svc/chain';
import { AppError, type Logger, type Store } from '@svc/platform';
import type { LinkedWorkers } from '../link/worker-link-server.js';
import { holdsSession, type LiveWorker } from '../link/worker-presence.js';
import { revertOf, type ServiceChain, type ServiceTransaction } from '../chain/service-chain.js';
import {
  OPEN_SESSIONS_GROUP,
  announceOpenSession,
  parseOpenSession,
  parsePooledSession,
  poolSession,
  sessionBusyKey,
  sessionPoolGroup,
  type PooledSession,
} from './session-records.js';
import type { SessionRecovery } from './session-recovery.js';

export type { PooledSession } from './session-records.js';

/** One session held for one job; `release` hands it back to the pool (exactly once). */
export interface SessionLease {
  readonly session: PooledSession;
  release(): Promise<void>;
  /** Takes the session out of the pool for good (it broke); the keeper closes it. */
  discard(): Promise<void>;
}

export interface SessionRequest {
  readonly owner: string;
  readonly model: string;
  readonly modelId: string;
  /** Who holds the session while the job runs (the call's id). */
  readonly holder: string;
  readonly conversationId?: string;
  /** Sessions not to use (a retry must run in a new session). */
  readonly excludeSessions?: ReadonlySet<bigint>;
  /** Workers not to open a session with (the one that just failed the job). */
  readonly excludeWorkers?: ReadonlySet<string>;
  readonly onOpened?: (sessionId: bigint, worker: string, tx: ServiceTransaction) => void;
  readonly onClaimed?: (sessionId: bigint, worker: string) => void;
}

export interface SessionPoolOptions {
  readonly store: Pick<Store, 'presence' | 'locks' | 'values' | 'rateWindows' | 'concurrency'>;
  readonly chain: ServiceChain;
  readonly workers: Pick<LinkedWorkers, 'live' | 'sendHint' | 'hintDeclined'>;
  /** New sessions per minute, server-wide. */
  readonly opensPerMinute: number;
  /** How long a job may hold its session before the lock lapses (beyond the job's deadline). */
  readonly holdTtlMs: number;
  /** A pooled session unused this long leaves the pool (and the keeper closes it). */
  readonly idleTtlMs: number;
  /** How long a conversation remembers the session that last served it. */
  readonly affinityTtlMs: number;
  readonly claimPollIntervalMs: number;
  /**
   * How long a claimed session keeps counting against its worker's free session slots here: until the
   * worker's next heartbeats report the slot taken (a couple of heartbeat intervals).
   */
  readonly slotHoldMs: number;
  /** Rebuilds the pools from the chain when the store lost them; asked before a new session is opened. */
  readonly recovery: Pick<SessionRecovery, 'ensure'>;
  readonly logger: Logger;
}

const SESSION_OPENS_KEY = 'sessions:opens';
/** How long a call waits for a worker to report the slot an eviction freed (it follows the chain's logs). */
const ROOM_WAIT_MS = 10_000;
const MINUTE_MS = 60_000;

/**
 * Sessions pooled per (owner, model) in the shared store, one job at a time per session (a store lock),
 * so every replica draws from the same pool. A call prefers the session that last served its
 * conversation, then any free one, and only then opens a new session with the least loaded linked
 * worker that serves the model; opens are limited per minute server-wide.
 */
export class SessionPool {
  readonly #options: SessionPoolOptions;

  constructor(options: SessionPoolOptions) {
    this.#options = options;
  }

  async acquire(request: SessionRequest): Promise<SessionLease> {
    const live = await this.#options.workers.live();
    const pooled = await this.#takePooled(request, live);
    if (pooled) return pooled;
    // An empty pool in a store that lost its records is no reason to open a session: recover them first.
    if (await this.#options.recovery.ensure()) {
      const recovered = await this.#takePooled(request, live);
      if (recovered) return recovered;
    }
    return this.#open(request, live);
  }

  async #takePooled(request: SessionRequest, live: readonly LiveWorker[]): Promise<SessionLease | undefined> {
    const { store } = this.#options;
    const group = sessionPoolGroup(request.owner, request.modelId);
    const liveWorkers = new Map(live.map((worker) => [worker.address.toLowerCase(), worker]));
    const entries = (await store.presence.list(group))
      .map((entry) => parsePooledSession(entry.value))
      .filter((session): session is PooledSession => session !== undefined);
    const preferred = request.conversationId
      ? await store.values.get(affinityKey(request.owner, request.modelId, request.conversationId))
      : null;
    entries.sort(
      (a, b) => Number(b.sessionId.toString() === preferred) - Number(a.sessionId.toString() === preferred),
    );
    for (const session of entries) {
      if (request.excludeSessions?.has(session.sessionId)) continue;
      if (request.excludeWorkers?.has(session.worker.toLowerCase())) continue;
      // Its worker is not heartbeating now: use (or open) another session. A worker back from a blip finds
      // its sessions still pooled; one gone for good leaves them idle until the keeper closes them.
      const worker = liveWorkers.get(session.worker.toLowerCase());
      if (!worker) continue;
      const lock = await store.locks.tryAcquire(
        sessionBusyKey(session.sessionId),
        request.holder,
        this.#options.holdTtlMs,
      );
      if (!lock.acquired) continue;
      if (session.recovered && !holdsSession(worker, session.sessionId)) {
        // Recovered from the chain, and its worker came back without the key: nobody can serve it.
        await this.#retire(session, 'its worker no longer holds its key');
        await store.locks.release(sessionBusyKey(session.sessionId), request.holder);
        continue;
      }
      return this.#lease(session, request);
    }
    return undefined;
  }

  async #open(request: SessionRequest, liveNow: readonly LiveWorker[]): Promise<SessionLease> {
    const { store } = this.#options;
    let live = liveNow;
    let candidates = withRoomFor(request, live);
    if (candidates.length === 0) {
      // Every worker is full: make room by closing the idle session used longest ago, if there is one.
      const evicted = await this.#evictIdleSession(request, live);
      if (evicted) {
        live = await this.#waitForRoom(evicted);
        candidates = withRoomFor(request, live);
      }
    }
    if (candidates.length === 0) {
      throw new AppError('no_worker_available', {
        message: `No linked worker has room for a new session of ${request.model} now; try again shortly.`,
        retryAfterSeconds: 5,
      });
    }
    const verdict = await store.rateWindows.hit(SESSION_OPENS_KEY, this.#options.opensPerMinute, MINUTE_MS);
    if (!verdict.allowed) {
      throw new AppError('session_open_limit_exceeded', {
        retryAfterSeconds: Math.max(1, Math.ceil(verdict.retryAfterMs / 1000)),
      });
    }
    for (const worker of candidates) {
      // Reserve one of the worker's free session slots across replicas: two calls opening at once must
      // not both count on the last slot its heartbeat reported.
      const slotKey = `sessions:opening:${worker.address.toLowerCase()}`;
      const slot = await store.concurrency.acquire(
        slotKey,
        worker.freeSessionSlots,
        this.#options.slotHoldMs + MINUTE_MS,
      );
      if (!slot.granted) continue;
      let lease: SessionLease | undefined;
      try {
        lease = await this.#openWith(worker.address, request);
      } finally {
        if (lease) await store.concurrency.renew(slotKey, slot.leaseId, this.#options.slotHoldMs);
        else await store.concurrency.release(slotKey, slot.leaseId);
      }
      if (lease) return lease;
    }
    throw new AppError('no_worker_available', {
      message: `No registered worker could take a session of ${request.model}; try again shortly.`,
      retryAfterSeconds: 5,
    });
  }

  /**
   * Closes the least recently used idle session held by a live worker that serves the model, so that
   * worker frees a session slot; returns that worker, or undefined when no session is idle.
   */
  async #evictIdleSession(request: SessionRequest, live: readonly LiveWorker[]): Promise<string | undefined> {
    const { store, chain, logger } = this.#options;
    const eligible = new Set(
      live
        .filter((worker) => worker.models.includes(request.model) && worker.freeJobSlots > 0)
        .filter((worker) => !request.excludeWorkers?.has(worker.address.toLowerCase()))
        .map((worker) => worker.address.toLowerCase()),
    );
    const pools = new Map<string, Map<string, number>>();
    const idle: { sessionId: string; owner: string; modelId: string; worker: string; usedUntil: number }[] =
      [];
    for (const entry of await store.presence.list(OPEN_SESSIONS_GROUP)) {
      const record = parseOpenSession(entry.value);
      if (!record || !eligible.has(record.worker.toLowerCase())) continue;
      const group = sessionPoolGroup(record.owner, record.modelId);
      let pool = pools.get(group);
      if (!pool) {
        pool = new Map(
          (await store.presence.list(group)).map((pooled) => [pooled.member, pooled.expiresAtMs]),
        );
        pools.set(group, pool);
      }
      // Only a session waiting in its pool is idle (one being opened or used is not there).
      const usedUntil = pool.get(entry.member);
      if (usedUntil !== undefined) idle.push({ sessionId: entry.member, ...record, usedUntil });
    }
    idle.sort((a, b) => a.usedUntil - b.usedUntil);
    for (const candidate of idle) {
      const sessionId = BigInt(candidate.sessionId);
      const holder = `evict:${request.holder}`;
      if (
        !(await store.locks.tryAcquire(sessionBusyKey(sessionId), holder, this.#options.holdTtlMs)).acquired
      )
        continue;
      try {
        await store.presence.withdraw(
          sessionPoolGroup(candidate.owner, candidate.modelId),
          candidate.sessionId,
        );
        await chain.closeSession(sessionId);
        await store.presence.withdraw(OPEN_SESSIONS_GROUP, candidate.sessionId);
        logger.info(
          { sessionId: candidate.sessionId, worker: candidate.worker },
          'closed an idle session to make room',
        );
        return candidate.worker;
      } catch (error) {
        logger.warn({ err: error, sessionId: candidate.sessionId }, 'idle session not closed');
      } finally {
        await store.locks.release(sessionBusyKey(sessionId), holder);
      }
    }
    return undefined;
  }

  /** The live workers once `worker` reports a free session slot again (it saw the close), or after a while. */
  async #waitForRoom(worker: string): Promise<LiveWorker[]> {
    const deadline = Date.now() + ROOM_WAIT_MS;
    for (;;) {
      const live = await this.#options.workers.live();
      const freed = live.find((candidate) => candidate.address.toLowerCase() === worker.toLowerCase());
      if (!freed || freed.freeSessionSlots > 0 || Date.now() >= deadline) return live;
      await sleep(this.#options.claimPollIntervalMs);
    }
  }

  /**
   * Opens a session naming `worker` and waits for its claim. Undefined when the worker turned it down
   * (or the registry no longer lets it serve): the caller tries the next worker. A worker that stays
   * silent through the claim window is `no_worker_available`.
   */
  async #openWith(worker: string, request: SessionRequest): Promise<SessionLease | undefined> {
    const { store, chain, logger } = this.#options;
    let opened: Awaited<ReturnType<ServiceChain['openSession']>>;
    try {
      opened = await chain.openSession(request.owner, request.modelId, worker);
    } catch (error) {
      const revert = revertOf(error)?.name;
      // The registry and the presence disagree for a moment (deregistered, models changed): next worker.
      if (revert === 'WorkerNotActive' || revert === 'WorkerDoesNotServeModel') return undefined;
      throw error;
    }
    const { sessionId, claimDeadline, tx } = opened;
    request.onOpened?.(sessionId, worker, tx);
    await announceOpenSession(store, sessionId, { owner: request.owner, modelId: request.modelId, worker });
    await store.locks.tryAcquire(sessionBusyKey(sessionId), request.holder, this.#options.holdTtlMs);
    const hintId = `session-${sessionId}`;
    this.#options.workers.sendHint(worker, {
      case: 'sessionOpened',
      value: {
        hintId,
        sessionId: sessionId.toString(),
        model: request.model,
        claimDeadline: timestampFromDate(new Date(claimDeadline * 1000)),
      },
    });
    const claim = await this.#awaitClaim(sessionId, claimDeadline, hintId);
    if (claim.kind !== 'claimed') {
      const unclaimed: PooledSession = {
        sessionId,
        owner: request.owner,
        model: request.model,
        modelId: request.modelId,
        worker,
        publicKey: new Uint8Array(),
      };
      await this.#retire(
        unclaimed,
        claim.kind === 'declined' ? 'its worker declined it' : 'not claimed in time',
      );
      await store.locks.release(sessionBusyKey(sessionId), request.holder);
      if (claim.kind === 'declined') return undefined;
      throw new AppError('no_worker_available', {
        message: `The worker picked for a new session of ${request.model} did not claim it within the claim window; try again.`,
        retryAfterSeconds: 1,
      });
    }
    request.onClaimed?.(sessionId, worker);
    logger.info(
      { sessionId: sessionId.toString(), worker, model: request.model },
      'session opened and claimed',
    );
    const session: PooledSession = {
      sessionId,
      owner: request.owner,
      model: request.model,
      modelId: request.modelId,
      worker,
      publicKey: claim.publicKey,
    };
    return this.#lease(session, request);
  }

  /** Waits for the claim: the session's public key, or why there is none (chain time judges the window). */
  async #awaitClaim(
    sessionId: bigint,
    claimDeadline: number,
    hintId: string,
  ): Promise<{ kind: 'claimed'; publicKey: Uint8Array } | { kind: 'declined' | 'unclaimed' }> {
    const { chain, claimPollIntervalMs, workers } = this.#options;
    const claimed = (publicKey: string) => ({ kind: 'claimed' as const, publicKey: getBytes(publicKey) });
    for (;;) {
      const session = await chain.reads.getSession(sessionId);
      if (session.state === SessionState.Active) return claimed(session.publicKey);
      if (session.state !== SessionState.Open) return { kind: 'unclaimed' };
      if (workers.hintDeclined(hintId)) return { kind: 'declined' };
      if ((await chain.now()) > claimDeadline) {
        // One last look: a claim mined in the deadline's own block counts.
        const last = await chain.reads.getSession(sessionId);
        return last.state === SessionState.Active ? claimed(last.publicKey) : { kind: 'unclaimed' };
      }
      await sleep(claimPollIntervalMs);
    }
  }

  #lease(session: PooledSession, request: SessionRequest): SessionLease {
    const { store, idleTtlMs, affinityTtlMs } = this.#options;
    let done = false;
    const finish = async (keep: boolean): Promise<void> => {
      if (done) return;
      done = true;
      if (keep) {
        // Used by a job just now: its worker held the key, whatever the pool said when it was recovered.
        await poolSession(store, { ...session, recovered: false }, idleTtlMs);
        if (request.conversationId)
          await store.values.set(
            affinityKey(session.owner, session.modelId, request.conversationId),
            session.sessionId.toString(),
            affinityTtlMs,
          );
      } else {
        await this.#retire(session, 'discarded after a failure');
      }
      await store.locks.release(sessionBusyKey(session.sessionId), request.holder);
    };
    return { session, release: () => finish(true), discard: () => finish(false) };
  }

  /** Takes a session out of the pool and closes it on chain in the background (the keeper retries). */
  async #retire(session: PooledSession, why: string): Promise<void> {
    const { store, chain, logger } = this.#options;
    await store.presence.withdraw(
      sessionPoolGroup(session.owner, session.modelId),
      session.sessionId.toString(),
    );
    logger.info(
      { sessionId: session.sessionId.toString(), worker: session.worker, why },
      'session leaves the pool',
    );
    void chain
      .closeSession(session.sessionId)
      .then(() => store.presence.withdraw(OPEN_SESSIONS_GROUP, session.sessionId.toString()))
      .catch((error: unknown) =>
        logger.warn(
          { err: error, sessionId: session.sessionId.toString() },
          'session not closed now; the keeper will close it',
        ),
      );
  }
}

/** Workers with room for a new session of the request's model, least loaded first. */
function withRoomFor(request: SessionRequest, live: readonly LiveWorker[]): LiveWorker[] {
  return live
    .filter(
      (worker) =>
        worker.models.includes(request.model) &&
        worker.freeSessionSlots > 0 &&
        worker.freeJobSlots > 0 &&
        !request.excludeWorkers?.has(worker.address.toLowerCase()),
    )
    .sort((a, b) => b.freeJobSlots - a.freeJobSlots || b.freeSessionSlots - a.freeSessionSlots);
}

function affinityKey(owner: string, modelId: string, conversationId: string): string {
  return `sessions:conversation:${owner.toLowerCase()}:${modelId.toLowerCase()}:${conversationId}`;
}
