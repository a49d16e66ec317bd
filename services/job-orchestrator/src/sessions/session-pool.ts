import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { getBytes } from 'ethers';
import { SessionState } from '@svc/chain';
import { AppError, renewWhileHeld, type Logger, type Renewal, type Store } from '@svc/platform';
import type { LinkedWorkers } from '../link/worker-link-server.js';
import { holdsSession, type LiveWorker } from '../link/worker-presence.js';
import { revertOf, type ServiceChain, type ServiceTransaction } from '../chain/service-chain.js';
import {
  OPEN_SESSIONS_GROUP,
  announceOpenSession,
  heldBackUntil,
  parseOpenSession,
  parsePooledSession,
  poolSession,
  sessionBusyKey,
  sessionPoolGroup,
  type OpenSessionRecord,
  type PooledSession,
  type UnusedSessionLease,
} from './session-records.js';
import type { SessionOpenBudget } from './session-open-budget.js';
import type { SessionRecovery } from './session-recovery.js';
import { rankWorkers, type WorkerReputation, type WorkerStanding } from './worker-reputation.js';

export type { PooledSession } from './session-records.js';

/** What a job's end says of the session's worker: it answered, or it failed the job. */
export type WorkerOutcome = 'answered' | 'failed';

/**
 * One session held for one job; `release` hands it back to the pool (exactly once). `release` and
 * `discard` never throw, and let the session's busy lock go whatever else fails: call one in a `finally`.
 */
export interface SessionLease {
  readonly session: PooledSession;
  /** Hands the session back; with an outcome, the worker's record (WorkerReputation) counts it. */
  release(outcome?: WorkerOutcome): Promise<void>;
  /**
   * Takes the session out of the pool for good (it broke); the keeper closes it. With an outcome (its
   * worker failed the job), the worker's record counts it.
   */
  discard(outcome?: WorkerOutcome): Promise<void>;
  /**
   * A job was submitted in the session: it no longer counts against its payer's and key's budget of unused
   * sessions, and the payer counts as paying. Idempotent.
   */
  jobSubmitted(): Promise<void>;
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
  /** Who pays the call (the wallet of its key, or the per-call payer): its budget of unused sessions. */
  readonly payer?: string;
  /** The call's API key, when it has one: its budget of unused sessions. */
  readonly keyId?: string;
  /** A session for the next attempt of a job already paid on chain: no budget of unused sessions applies. */
  readonly forReassignment?: boolean;
  /** A spare opened ahead of demand: no caller's budget, and it never closes another session to make room. */
  readonly spare?: boolean;
  readonly onOpened?: (sessionId: bigint, worker: string, tx: ServiceTransaction) => void;
  readonly onClaimed?: (sessionId: bigint, worker: string) => void;
}

export interface SessionPoolOptions {
  readonly store: Pick<Store, 'presence' | 'locks' | 'values' | 'rateWindows' | 'concurrency'>;
  readonly chain: ServiceChain;
  readonly workers: Pick<LinkedWorkers, 'live' | 'sendHint' | 'hintDeclined'>;
  /**
   * How long what a call holds (its session's busy lock, an unproven worker's trial lease) outlives the
   * call: renewed every third of it while the call lives, so a replica that dies frees them within it.
   */
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
  /** What a new session costs its callers' budgets: the opens per minute, the sessions with no job. */
  readonly opens: Pick<SessionOpenBudget, 'take' | 'release' | 'markPaid' | 'settings'>;
  /** What each worker did (answers, failures, backoff), across calls and replicas. */
  readonly reputation: Pick<WorkerReputation, 'answered' | 'failed' | 'standings'>;
  /**
   * New sessions an unproven worker (no answered job on record) has in calls' hands at once while a
   * proven worker serves the model; beyond them it gets no new session until it answers.
   */
  readonly trialSessions: number;
  readonly logger: Logger;
}

/** How a new session's claim went: its public key, or why there is none. */
type SessionClaim = { kind: 'claimed'; publicKey: Uint8Array } | { kind: 'declined' | 'unclaimed' };

/** What a call drew from its pool: a session, or none (and when the first held-back one comes free). */
interface PoolDraw {
  readonly lease?: SessionLease;
  readonly heldBackUntilMs?: number;
}

/** How long a call waits for a worker to report the slot an eviction freed (it follows the chain's logs). */
const ROOM_WAIT_MS = 10_000;
const MINUTE_MS = 60_000;

/**
 * Sessions pooled per (owner, model) in the shared store, one job at a time per session (a store lock),
 * so every replica draws from the same pool. A call prefers the session that last served its
 * conversation, then any free one, and only then opens a new session with a linked worker that serves
 * the model: proven workers (an answered job on record) first, unproven ones up to `trialSessions` each,
 * workers that failed lately (backed off) last, the least loaded first within each. Opens are limited per
 * minute server-wide, with a smaller share for payers that paid for no job lately, and each payer and key
 * may hold only so many sessions in which no job was ever submitted.
 */
export class SessionPool {
  readonly #options: SessionPoolOptions;
  /** Session locks this replica's calls hold (see Holdings.lock). */
  readonly #heldHere = new Map<string, string>();

  constructor(options: SessionPoolOptions) {
    this.#options = options;
  }

  async acquire(request: SessionRequest): Promise<SessionLease> {
    const live = await this.#options.workers.live();
    const standings = await this.#options.reputation.standings(live.map((worker) => worker.address));
    let pooled = await this.#takePooled(request, live, standings, false);
    // An empty pool in a store that lost its records is no reason to open a session: recover them first.
    if (!pooled.lease && (await this.#options.recovery.ensure()))
      pooled = await this.#takePooled(request, live, standings, false);
    // Sessions just recovered are held back a moment (`heldBackUntil`); one of them is worth that wait.
    if (!pooled.lease && pooled.heldBackUntilMs !== undefined) {
      await sleep(Math.max(0, pooled.heldBackUntilMs - Date.now()));
      pooled = await this.#takePooled(request, live, standings, false);
    }
    return pooled.lease ?? this.#open(request, live, standings);
  }

  /** Claimed sessions of the owner's model waiting in the pool now, with a live worker, held by no call. */
  async idleSessions(owner: string, modelId: string): Promise<number> {
    const { store, workers } = this.#options;
    const live = new Set((await workers.live()).map((worker) => worker.address.toLowerCase()));
    let idle = 0;
    for (const entry of await store.presence.list(sessionPoolGroup(owner, modelId))) {
      const session = parsePooledSession(entry.value);
      if (!session || !live.has(session.worker.toLowerCase())) continue;
      if ((await store.locks.holder(sessionBusyKey(session.sessionId))) === null) idle += 1;
    }
    return idle;
  }

  /**
   * Opens and claims one session for the owner's model and puts it in the pool idle, ahead of any call
   * (SessionWarmer). Only the server-wide opens per minute apply, and it closes nobody's session for room.
   */
  async openSpare(request: Pick<SessionRequest, 'owner' | 'model' | 'modelId'>): Promise<void> {
    const live = await this.#options.workers.live();
    const standings = await this.#options.reputation.standings(live.map((worker) => worker.address));
    const lease = await this.#open(
      { ...request, holder: `spare:${randomUUID()}`, spare: true },
      live,
      standings,
    );
    await lease.release();
  }

  async #takePooled(
    request: SessionRequest,
    live: readonly LiveWorker[],
    standings: ReadonlyMap<string, WorkerStanding>,
    backedOffToo: boolean,
  ): Promise<PoolDraw> {
    const { store } = this.#options;
    const group = sessionPoolGroup(request.owner, request.modelId);
    let heldBackUntilMs: number | undefined;
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
      // A worker that failed lately serves only when no other worker can (see #open).
      if (!backedOffToo && standings.get(session.worker.toLowerCase())?.backedOff) continue;
      const until = heldBackUntil(session);
      if (until !== undefined) {
        heldBackUntilMs = Math.min(heldBackUntilMs ?? until, until);
        continue;
      }
      const held = this.#holdings();
      if (!(await held.lock(sessionBusyKey(session.sessionId), request.holder))) continue;
      // Listed before its lock was taken: a call that held it may have retired it meanwhile (a session
      // leaves the pool under its lock, so it is known now). Taken anyway, its next job would go to a
      // session being closed, after the worker answered it.
      if (
        !(await store.presence.list(group)).some((entry) => entry.member === session.sessionId.toString())
      ) {
        await held.end();
        continue;
      }
      if (session.recovered && !holdsSession(worker, session.sessionId)) {
        // Recovered from the chain, and its worker came back without the key: nobody can serve it.
        try {
          await this.#retire(session, 'its worker no longer holds its key');
        } finally {
          await held.end();
        }
        continue;
      }
      return { lease: this.#lease(session, request, held) };
    }
    return heldBackUntilMs === undefined ? {} : { heldBackUntilMs };
  }

  async #open(
    request: SessionRequest,
    liveNow: readonly LiveWorker[],
    standings: ReadonlyMap<string, WorkerStanding>,
  ): Promise<SessionLease> {
    let live = liveNow;
    let { candidates, trial } = this.#ranked(request, live, standings);
    if (candidates.length === 0 && !request.spare) {
      // Every worker is full: make room by closing the idle session used longest ago, if there is one.
      const evicted = await this.#evictIdleSession(request, live);
      if (evicted) {
        live = await this.#waitForRoom(evicted);
        ({ candidates, trial } = this.#ranked(request, live, standings));
      }
    }
    if (candidates.length === 0) {
      throw new AppError('no_worker_available', {
        message: `No linked worker has room for a new session of ${request.model} now; try again shortly.`,
        retryAfterSeconds: 5,
      });
    }
    if (standings.get(candidates[0]!.address.toLowerCase())?.backedOff) {
      if (request.spare)
        throw new AppError('no_worker_available', {
          message: 'Only backed-off workers have room: no spare.',
        });
      // Only workers that failed lately have room: a pooled session with one of them costs no open.
      const pooled = await this.#takePooled(request, live, standings, true);
      if (pooled.lease) return pooled.lease;
    }
    const budget = await this.#options.opens.take(request);
    let lease: SessionLease | undefined;
    try {
      lease = await this.#openWithOneOf(candidates, request, budget, trial ? standings : undefined);
      return lease;
    } finally {
      if (!lease) await this.#releaseLeases(budget);
    }
  }

  /** A new set of what one call holds, renewed while it lives (`Holdings`). */
  #holdings(): Holdings {
    return new Holdings(this.#options.store, this.#options.holdTtlMs, this.#heldHere);
  }

  async #releaseLeases(leases: readonly UnusedSessionLease[] | undefined): Promise<void> {
    await this.#options.opens.release(leases);
  }

  /** The live workers with room for a new session of the request's model, best first (`rankWorkers`). */
  #ranked(
    request: SessionRequest,
    live: readonly LiveWorker[],
    standings: ReadonlyMap<string, WorkerStanding>,
  ): { candidates: LiveWorker[]; trial: boolean } {
    return rankWorkers(withRoomFor(request, live), live, request.model, standings);
  }

  /**
   * Opens a session with the first candidate that takes it. With `trial` (the standings, while a proven
   * worker serves the model), an unproven worker must also hold one of its `trialSessions` leases, kept for
   * as long as a call holds the session (with its busy lock, in the same `Holdings`).
   */
  async #openWithOneOf(
    candidates: readonly LiveWorker[],
    request: SessionRequest,
    budget: readonly UnusedSessionLease[],
    trial: ReadonlyMap<string, WorkerStanding> | undefined,
  ): Promise<SessionLease> {
    const { store } = this.#options;
    for (const worker of candidates) {
      const standing = trial?.get(worker.address.toLowerCase());
      const held = this.#holdings();
      if (
        trial &&
        !standing?.backedOff &&
        (standing?.answered ?? 0) === 0 &&
        !(await held.lease(`workers:trial:${worker.address.toLowerCase()}`, this.#options.trialSessions))
      )
        continue;
      // Reserve one of the worker's free session slots across replicas: two calls opening at once must
      // not both count on the last slot its heartbeat reported.
      const slotKey = `sessions:opening:${worker.address.toLowerCase()}`;
      const slot = await store.concurrency.acquire(
        slotKey,
        worker.freeSessionSlots,
        this.#options.slotHoldMs + MINUTE_MS,
      );
      if (!slot.granted) {
        await held.end();
        continue;
      }
      let lease: SessionLease | undefined;
      try {
        lease = await this.#openWith(worker.address, request, budget, held);
      } finally {
        if (lease) await store.concurrency.renew(slotKey, slot.leaseId, this.#options.slotHoldMs);
        else await store.concurrency.release(slotKey, slot.leaseId);
        if (!lease) await held.end();
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
    const idle: (OpenSessionRecord & { sessionId: string; usedUntil: number })[] = [];
    for (const entry of await store.presence.list(OPEN_SESSIONS_GROUP)) {
      const record = parseOpenSession(entry.value);
      if (!record || !eligible.has(record.worker.toLowerCase())) continue;
      const group = sessionPoolGroup(record.owner, record.modelId);
      let pool = pools.get(group);
      if (!pool) {
        pool = new Map(
          (await store.presence.list(group))
            // One just recovered may still be in a call's hands (`heldBackUntil`).
            .filter((pooled) => heldBackUntil(parsePooledSession(pooled.value) ?? {}) === undefined)
            .map((pooled) => [pooled.member, pooled.expiresAtMs]),
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
      const held = this.#holdings();
      if (!(await held.lock(sessionBusyKey(sessionId), `evict:${request.holder}`))) continue;
      try {
        await store.presence.withdraw(
          sessionPoolGroup(candidate.owner, candidate.modelId),
          candidate.sessionId,
        );
        await chain.closeSession(sessionId);
        await store.presence.withdraw(OPEN_SESSIONS_GROUP, candidate.sessionId);
        await this.#releaseLeases(candidate.unusedLeases);
        logger.info(
          { sessionId: candidate.sessionId, worker: candidate.worker },
          'closed an idle session to make room',
        );
        return candidate.worker;
      } catch (error) {
        logger.warn({ err: error, sessionId: candidate.sessionId }, 'idle session not closed');
      } finally {
        await held.end();
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
  async #openWith(
    worker: string,
    request: SessionRequest,
    budget: readonly UnusedSessionLease[],
    held: Holdings,
  ): Promise<SessionLease | undefined> {
    const { store, chain, logger, reputation } = this.#options;
    const unusedLeases = budget.length > 0 ? { unusedLeases: budget } : {};
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
    await announceOpenSession(store, sessionId, {
      owner: request.owner,
      modelId: request.modelId,
      worker,
      ...unusedLeases,
    });
    // A new session: nobody else can hold its lock.
    await held.lock(sessionBusyKey(sessionId), request.holder);
    let claim: SessionClaim | undefined;
    try {
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
      claim = await this.#awaitClaim(sessionId, claimDeadline, hintId);
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
      }
    } finally {
      // No lease holds the session unless it was claimed: its lock goes now, whatever failed (the trial
      // lease goes with the caller's end of `held`).
      if (claim?.kind !== 'claimed') await held.unlock(sessionBusyKey(sessionId));
    }
    if (claim.kind !== 'claimed') {
      if (claim.kind === 'declined') return undefined;
      // Silent through the claim window: that costs the worker (its backoff keeps the next call off it).
      await reputation.failed(worker);
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
      ...unusedLeases,
    };
    return this.#lease(session, request, held);
  }

  /** Waits for the claim: the session's public key, or why there is none (chain time judges the window). */
  async #awaitClaim(sessionId: bigint, claimDeadline: number, hintId: string): Promise<SessionClaim> {
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

  /** The lease of a session whose busy lock (and trial lease, if any) `held` holds, kept until it ends. */
  #lease(session: PooledSession, request: SessionRequest, held: Holdings): SessionLease {
    const { store, idleTtlMs, affinityTtlMs, opens, reputation, logger } = this.#options;
    let done = false;
    let current = session;
    // Never throws: the job is on chain by now; a store that fails here leaves the leases to their TTL.
    const jobSubmitted = async (): Promise<void> => {
      try {
        const leases = current.unusedLeases;
        if (request.payer) await this.#options.opens.markPaid(request.payer);
        if (!leases) return;
        const { unusedLeases: _spent, ...used } = current;
        current = used;
        await announceOpenSession(store, current.sessionId, {
          owner: current.owner,
          modelId: current.modelId,
          worker: current.worker,
        });
        await this.#releaseLeases(leases);
      } catch (error) {
        logger.warn({ err: error, sessionId: current.sessionId.toString() }, 'session not marked as used');
      }
    };
    const recordOutcome = async (outcome: WorkerOutcome | undefined): Promise<void> => {
      try {
        if (outcome === 'answered') await reputation.answered(current.worker);
        else if (outcome === 'failed') await reputation.failed(current.worker);
      } catch (error) {
        logger.warn({ err: error, worker: current.worker }, "worker's record not updated");
      }
    };
    // Never throws, and lets the busy lock go whatever the store writes before it do: callers release in
    // their own `finally`, and a lock left held keeps the session from every call until its TTL.
    const finish = async (keep: boolean, outcome?: WorkerOutcome): Promise<void> => {
      if (done) return;
      done = true;
      const sessionId = session.sessionId.toString();
      try {
        await recordOutcome(outcome);
        // The unproven worker's trial session is free again once the call lets the session go.
        await held.endLeases();
        if (keep) {
          // Used by a job just now: its worker held the key, whatever the pool said when it was recovered.
          // A session no job was ever submitted in waits only until the keeper closes it early.
          const { heldBackUntilMs: _heldBack, ...used } = current;
          await poolSession(
            store,
            { ...used, recovered: false },
            current.unusedLeases ? Math.min(idleTtlMs, opens.settings.closeAfterMs) : idleTtlMs,
          );
          if (request.conversationId)
            await store.values.set(
              affinityKey(session.owner, session.modelId, request.conversationId),
              sessionId,
              affinityTtlMs,
            );
        } else {
          // Another call holds it (this call's lock was lost with the store, and the session recovered into
          // the pool): closing it would revert that call's submission. It only leaves the pool; the keeper
          // closes it once idle.
          const holder = await store.locks.holder(sessionBusyKey(session.sessionId));
          await this.#retire(current, 'discarded after a failure', {
            close: holder === null || holder === request.holder,
          });
        }
      } catch (error) {
        // Not pooled: the keeper closes it once idle (its busy lock, released below, no longer hides it).
        logger.warn({ err: error, sessionId }, 'session not handed back to the pool');
      } finally {
        await held
          .end()
          .catch((error: unknown) =>
            logger.warn({ err: error, sessionId }, 'session busy lock not released; it lapses at its TTL'),
          );
      }
    };
    return {
      session,
      release: (outcome) => finish(true, outcome),
      discard: (outcome) => finish(false, outcome),
      jobSubmitted,
    };
  }

  /**
   * Takes a session out of the pool and closes it on chain in the background (the keeper retries); with
   * `close` false, only out of the pool (the keeper closes it once idle).
   */
  async #retire(session: PooledSession, why: string, { close } = { close: true }): Promise<void> {
    const { store, chain, logger } = this.#options;
    await store.presence.withdraw(
      sessionPoolGroup(session.owner, session.modelId),
      session.sessionId.toString(),
    );
    logger.info(
      { sessionId: session.sessionId.toString(), worker: session.worker, why, closing: close },
      'session leaves the pool',
    );
    if (!close) return;
    void chain
      .closeSession(session.sessionId)
      .then(() => store.presence.withdraw(OPEN_SESSIONS_GROUP, session.sessionId.toString()))
      .then(() => this.#releaseLeases(session.unusedLeases))
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

/**
 * What one call holds in the shared store: session busy locks and concurrency leases (an unproven worker's
 * trial session). Each is taken for `ttlMs` and renewed every third of it until `end`, so a call that runs
 * long keeps them, and a replica that dies (SIGKILL, a lost node) lets them go within `ttlMs` rather than
 * at the longest life of a job.
 */
class Holdings {
  /** Each lock held, with its owner. */
  readonly #locks = new Map<string, string>();
  readonly #leases: { key: string; leaseId: string }[] = [];
  #renewal: Renewal | undefined;

  constructor(
    private readonly store: Pick<Store, 'locks' | 'concurrency'>,
    private readonly ttlMs: number,
    /** The locks this replica's calls hold, by key, with their owners: its own memory, not the store's. */
    private readonly heldHere: Map<string, string>,
  ) {}

  /**
   * Takes the lock for `owner`; false when another holds it, in the store or in this replica. A store that
   * lost its locks (Redis restarted empty) must not let a second call of this replica into a session whose
   * first call still holds it: its submission may be unmined, and the session's next job id is its job's.
   */
  async lock(key: string, owner: string): Promise<boolean> {
    const here = this.heldHere.get(key);
    if (here !== undefined && here !== owner) return false;
    if (!(await this.store.locks.tryAcquire(key, owner, this.ttlMs)).acquired) return false;
    this.#locks.set(key, owner);
    this.heldHere.set(key, owner);
    this.#renew();
    return true;
  }

  /** Takes one of `limit` concurrent leases on `key`; false when all are taken. */
  async lease(key: string, limit: number): Promise<boolean> {
    const granted = await this.store.concurrency.acquire(key, limit, this.ttlMs);
    if (!granted.granted) return false;
    this.#leases.push({ key, leaseId: granted.leaseId });
    this.#renew();
    return true;
  }

  async unlock(key: string): Promise<void> {
    const owner = this.#locks.get(key);
    if (owner === undefined) return;
    this.#locks.delete(key);
    if (this.heldHere.get(key) === owner) this.heldHere.delete(key);
    await this.store.locks.release(key, owner);
  }

  async endLeases(): Promise<void> {
    for (const { key, leaseId } of this.#leases.splice(0)) await this.store.concurrency.release(key, leaseId);
  }

  /** Lets everything go (locks last: a session is free only once the rest of its call is). */
  async end(): Promise<void> {
    this.#renewal?.stop();
    this.#renewal = undefined;
    try {
      await this.endLeases();
    } finally {
      for (const key of [...this.#locks.keys()]) await this.unlock(key);
    }
  }

  #renew(): void {
    this.#renewal ??= renewWhileHeld(this.ttlMs, () =>
      Promise.allSettled([
        ...[...this.#locks].map(([key, owner]) => this.#renewLock(key, owner)),
        ...this.#leases.map(({ key, leaseId }) => this.store.concurrency.renew(key, leaseId, this.ttlMs)),
      ]),
    );
  }

  /**
   * Renews a lock, or takes it again when the store lost it (Redis restarted empty, or it lapsed while the
   * process stalled): the call still holds the session. Nobody else takes it meanwhile: a held session is
   * out of its pool, and one recovered into it from the chain is held back past this renewal
   * (`heldBackUntil`). A lock another call took anyway stays with it.
   */
  async #renewLock(key: string, owner: string): Promise<void> {
    if (await this.store.locks.renew(key, owner, this.ttlMs)) return;
    await this.store.locks.tryAcquire(key, owner, this.ttlMs);
  }
}
