import type { Store } from '@svc/platform';

/**
 * A lease a session with no submitted job yet holds on its payer's (and key's) budget of unused sessions;
 * released when its first job is submitted or it closes, else it lapses at its TTL.
 */
export interface UnusedSessionLease {
  readonly key: string;
  readonly leaseId: string;
}

/** A claimed session the service holds for an (owner, model) pair, as the pool records it. */
export interface PooledSession {
  readonly sessionId: bigint;
  readonly owner: string;
  readonly model: string;
  readonly modelId: string;
  readonly worker: string;
  /** The session's P-256 public key the worker published in `claimSession`. */
  readonly publicKey: Uint8Array;
  /**
   * Put back from the chain after the store lost its records: claimed long ago, so its worker's heartbeat
   * must list it before a job goes to it (the worker may have lost the key).
   */
  readonly recovered?: boolean;
  /** Recovered: no call takes it before then (see {@link heldBackUntil}). */
  readonly heldBackUntilMs?: number;
  /** Present while no job was ever submitted in it: the budget leases it holds (see UnusedSessionLease). */
  readonly unusedLeases?: readonly UnusedSessionLease[];
}

/** A session the service opened and has not closed, as the keeper's list records it. */
export interface OpenSessionRecord {
  readonly owner: string;
  readonly modelId: string;
  readonly worker: string;
  /** Present while no job was ever submitted in it: the keeper closes it after SESSION_UNUSED_CLOSE. */
  readonly unusedLeases?: readonly UnusedSessionLease[];
  /** Recovered: the keeper does not close it before then (see {@link heldBackUntil}). */
  readonly heldBackUntilMs?: number;
}

/**
 * Until when a session recovered from the chain is held back from calls, evictions and the keeper;
 * undefined once it is not (or never was). A store that lost its records lost the busy locks too, while
 * calls may still hold sessions with their job's submission unmined: a second call in such a session would
 * submit under the same job id, and a close would revert the submission. A live call takes its lost lock
 * again at its next renewal (`Holdings`), so a recovered session waits long enough for every such call to
 * have done so.
 */
export function heldBackUntil(
  record: { readonly heldBackUntilMs?: number },
  nowMs = Date.now(),
): number | undefined {
  const until = record.heldBackUntilMs;
  return until !== undefined && nowMs < until ? until : undefined;
}

/** Every session the service opened and has not closed: the keeper's list for idle closing. */
export const OPEN_SESSIONS_GROUP = 'sessions:open';
/** The keeper closes a listed session long before this; the TTL only keeps a lost entry from living forever. */
const OPEN_SESSION_TTL_MS = 7 * 24 * 3_600_000;

type SessionStore = Pick<Store, 'presence'>;

export function sessionPoolGroup(owner: string, modelId: string): string {
  return `sessions:pool:${owner.toLowerCase()}:${modelId.toLowerCase()}`;
}

export function sessionBusyKey(sessionId: bigint): string {
  return `sessions:busy:${sessionId}`;
}

export function announceOpenSession(
  store: SessionStore,
  sessionId: bigint,
  record: OpenSessionRecord,
): Promise<void> {
  return store.presence.announce(
    OPEN_SESSIONS_GROUP,
    sessionId.toString(),
    JSON.stringify({
      owner: record.owner,
      modelId: record.modelId,
      worker: record.worker,
      ...(record.unusedLeases ? { unusedLeases: record.unusedLeases } : {}),
      ...(record.heldBackUntilMs !== undefined ? { heldBackUntilMs: record.heldBackUntilMs } : {}),
    }),
    OPEN_SESSION_TTL_MS,
  );
}

/** Puts a claimed session (back) into its pool for `idleTtlMs`. */
export function poolSession(store: SessionStore, session: PooledSession, idleTtlMs: number): Promise<void> {
  return store.presence.announce(
    sessionPoolGroup(session.owner, session.modelId),
    session.sessionId.toString(),
    JSON.stringify({
      sessionId: session.sessionId.toString(),
      owner: session.owner,
      model: session.model,
      modelId: session.modelId,
      worker: session.worker,
      publicKey: Buffer.from(session.publicKey).toString('hex'),
      ...(session.recovered ? { recovered: true } : {}),
      ...(session.heldBackUntilMs !== undefined ? { heldBackUntilMs: session.heldBackUntilMs } : {}),
      ...(session.unusedLeases ? { unusedLeases: session.unusedLeases } : {}),
    }),
    idleTtlMs,
  );
}

export function parseOpenSession(value: string): OpenSessionRecord | undefined {
  try {
    const raw = JSON.parse(value) as Record<string, unknown>;
    if (typeof raw.owner !== 'string' || typeof raw.modelId !== 'string' || typeof raw.worker !== 'string')
      return undefined;
    const unusedLeases = parseUnusedLeases(raw.unusedLeases);
    return {
      owner: raw.owner,
      modelId: raw.modelId,
      worker: raw.worker,
      ...(unusedLeases ? { unusedLeases } : {}),
      ...(typeof raw.heldBackUntilMs === 'number' ? { heldBackUntilMs: raw.heldBackUntilMs } : {}),
    };
  } catch {
    return undefined;
  }
}

export function parsePooledSession(value: string): PooledSession | undefined {
  try {
    const raw = JSON.parse(value) as Record<string, unknown>;
    const { sessionId, owner, model, modelId, worker, publicKey } = raw;
    if (
      typeof sessionId !== 'string' ||
      typeof owner !== 'string' ||
      typeof model !== 'string' ||
      typeof modelId !== 'string' ||
      typeof worker !== 'string' ||
      typeof publicKey !== 'string'
    )
      return undefined;
    return {
      sessionId: BigInt(sessionId),
      owner,
      model,
      modelId,
      worker,
      publicKey: new Uint8Array(Buffer.from(publicKey, 'hex')),
      ...(raw.recovered === true ? { recovered: true } : {}),
      ...(typeof raw.heldBackUntilMs === 'number' ? { heldBackUntilMs: raw.heldBackUntilMs } : {}),
      ...(parseUnusedLeases(raw.unusedLeases) ? { unusedLeases: parseUnusedLeases(raw.unusedLeases) } : {}),
    };
  } catch {
    return undefined;
  }
}

function parseUnusedLeases(value: unknown): UnusedSessionLease[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value.filter(
    (lease): lease is UnusedSessionLease =>
      typeof lease === 'object' &&
      lease !== null &&
      typeof (lease as UnusedSessionLease).key === 'string' &&
      typeof (lease as UnusedSessionLease).leaseId === 'string',
  );
}
