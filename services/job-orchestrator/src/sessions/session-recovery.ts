import { setTimeout as sleep } from 'node:timers/promises';
import { getBytes } from 'ethers';
import { ProtocolLogCursor, SessionState } from '@svc/chain';
import type { Logger, Store } from '@svc/platform';
import type { ServiceChain } from '../chain/service-chain.js';
import type { LinkedWorkers } from '../link/worker-link-server.js';
import { holdsSession } from '../link/worker-presence.js';
import { OPEN_SESSIONS_GROUP, announceOpenSession, poolSession } from './session-records.js';

export interface SessionRecoveryOptions {
  readonly store: Pick<Store, 'values' | 'locks' | 'presence'>;
  readonly chain: ServiceChain;
  readonly workers: Pick<LinkedWorkers, 'live'>;
  /** First block of the deployment: sessions are read from there. */
  readonly fromBlock: number;
  /** Identifies this replica in the recovery lock. */
  readonly replicaId: string;
  /** How long a recovered session waits in its pool, as one handed back after a job. */
  readonly idleTtlMs: number;
  /**
   * How long a recovered session stays out of calls' and the keeper's reach (`heldBack`): long enough for a
   * live call that held it when the store lost its lock to have taken the lock again.
   */
  readonly holdBackMs: number;
  /** How long another replica's recovery is waited for before going on without it. */
  readonly waitForOtherMs: number;
  readonly logger: Logger;
}

/** What one recovery found on chain and did with it. */
export interface RecoverySummary {
  /** Sessions of the service (owned, or owned by a wallet that authorized it) still open on chain. */
  readonly open: number;
  /** Claimed sessions put back into their pools. */
  readonly pooled: number;
  /** Claimed sessions whose worker no longer holds the key, closed. */
  readonly closed: number;
  /** Sessions not yet claimed, left to the keeper (closed once their claim window passes). */
  readonly unclaimed: number;
}

/** Set once the store's view of the sessions was rebuilt from the chain; absent in a new or lost store. */
const RECOVERED_KEY = 'sessions:recovered';
const RECOVERY_LOCK = 'sessions:recovery';
/** A day: a store that kept everything still gets its view checked against the chain now and then. */
const RECOVERED_TTL_MS = 24 * 3_600_000;
const RECOVERY_LOCK_TTL_MS = 5 * 60_000;
const WAIT_POLL_MS = 200;

/**
 * The chain is the source of truth for sessions; the store only remembers them. When the store holds no
 * record of the sessions (the in-memory store of a restarted process, a Redis that restarted or was
 * flushed), the service would never reuse nor close the sessions it opened before, and their workers
 * would keep their slots until nobody could open a session any more. So, before trusting an empty pool,
 * the view is rebuilt from JobRegistry's logs: every session the service may act for that is still open
 * is known again to the keeper (which closes it once idle), a claimed one whose worker still holds its key
 * goes back into its pool, and one whose worker lost its key is closed.
 *
 * One replica recovers at a time (a store lock); the others wait for its marker.
 */
export class SessionRecovery {
  readonly #options: SessionRecoveryOptions;
  #running: Promise<boolean> | undefined;

  constructor(options: SessionRecoveryOptions) {
    this.#options = options;
  }

  /**
   * Recovers when the store does not know it has (one read when it does). True when sessions were put
   * back into the pools now, here or by another replica waited for: worth looking at the pool again.
   */
  async ensure(): Promise<boolean> {
    if ((await this.#options.store.values.get(RECOVERED_KEY)) !== null) return false;
    this.#running ??= this.#recoverOnce().finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #recoverOnce(): Promise<boolean> {
    const { store, replicaId, waitForOtherMs } = this.#options;
    const lock = await store.locks.tryAcquire(RECOVERY_LOCK, replicaId, RECOVERY_LOCK_TTL_MS);
    if (!lock.acquired) {
      // Another replica is at it: its result is in the shared store once its marker is.
      const deadline = Date.now() + waitForOtherMs;
      while (Date.now() < deadline) {
        if ((await store.values.get(RECOVERED_KEY)) !== null) return true;
        await sleep(WAIT_POLL_MS);
      }
      return false;
    }
    try {
      const summary = await this.recover();
      await store.values.set(RECOVERED_KEY, new Date().toISOString(), RECOVERED_TTL_MS);
      return summary.pooled > 0;
    } finally {
      await store.locks.release(RECOVERY_LOCK, replicaId);
    }
  }

  /** Rebuilds the store's view of the service's open sessions from the chain. Exposed for tests. */
  async recover(): Promise<RecoverySummary> {
    const { chain, workers, store, idleTtlMs, holdBackMs, logger } = this.#options;
    const open = await this.#openSessionsOfTheService();
    const live = new Map((await workers.live()).map((worker) => [worker.address.toLowerCase(), worker]));
    const modelNames = new Map<string, Promise<string>>();
    const modelName = (modelId: string) => {
      const key = modelId.toLowerCase();
      let name = modelNames.get(key);
      if (!name) modelNames.set(key, (name = chain.reads.jobRegistry.modelName(modelId)));
      return name;
    };
    let pooled = 0;
    let closed = 0;
    let unclaimed = 0;
    for (const sessionId of open) {
      const session = await chain.reads.getSession(sessionId);
      if (session.state !== SessionState.Open && session.state !== SessionState.Active) continue;
      const record = {
        owner: session.owner,
        modelId: session.modelId,
        worker: session.worker,
        heldBackUntilMs: Date.now() + holdBackMs,
      };
      // Known to the keeper from now on, which closes it once it sits idle (or its claim window passed).
      await announceOpenSession(store, sessionId, record);
      if (session.state === SessionState.Open) {
        unclaimed += 1;
        continue;
      }
      const worker = live.get(session.worker.toLowerCase());
      if (worker && !holdsSession(worker, sessionId)) {
        try {
          await chain.closeSession(sessionId);
          await store.presence.withdraw(OPEN_SESSIONS_GROUP, sessionId.toString());
          closed += 1;
        } catch (error) {
          logger.warn({ err: error, sessionId: sessionId.toString() }, 'session not closed; the keeper will');
        }
        continue;
      }
      // A worker not linked now is asked whether it still holds the key when a call would take the session.
      await poolSession(
        store,
        {
          sessionId,
          ...record,
          model: await modelName(session.modelId),
          publicKey: getBytes(session.publicKey),
          recovered: true,
        },
        idleTtlMs,
      );
      pooled += 1;
    }
    const summary = { open: open.length, pooled, closed, unclaimed };
    logger.info(summary, 'sessions recovered from the chain');
    return summary;
  }

  /** Sessions opened and not closed on chain that the service may act for, in id order. */
  async #openSessionsOfTheService(): Promise<bigint[]> {
    const { chain, fromBlock } = this.#options;
    const cursor = new ProtocolLogCursor({
      provider: chain.provider,
      addresses: chain.reads.addresses,
      fromBlock,
      confirmations: 0,
      events: ['SessionOpened', 'SessionClosed'],
    });
    const owners = new Map<string, string>();
    for (let batch = await cursor.next(); batch; batch = await cursor.next()) {
      for (const event of batch.events) {
        if (event.name === 'SessionOpened')
          owners.set(event.args.sessionId.toString(), event.args.owner.toLowerCase());
        else if (event.name === 'SessionClosed') owners.delete(event.args.sessionId.toString());
      }
    }
    const principal = chain.principal.toLowerCase();
    const actsFor = new Map<string, Promise<boolean>>();
    const ours: bigint[] = [];
    for (const [sessionId, owner] of owners) {
      let authorized = actsFor.get(owner);
      if (!authorized) {
        authorized =
          owner === principal ? Promise.resolve(true) : chain.reads.isDelegateAuthorized(owner, principal);
        actsFor.set(owner, authorized);
      }
      if (await authorized) ours.push(BigInt(sessionId));
    }
    return ours.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }
}
