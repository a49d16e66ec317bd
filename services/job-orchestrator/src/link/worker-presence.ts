import type { EpochMs, Presence } from '@svc/platform';

/** The store presence group every replica announces its linked workers in. */
export const WORKER_PRESENCE_GROUP = 'worker-link:workers';

/** A worker's last heartbeat, as every replica reads it from the store. */
export interface WorkerOffer {
  readonly models: readonly string[];
  readonly freeJobSlots: number;
  readonly freeSessionSlots: number;
  /**
   * The sessions whose keys the worker holds (decimal ids), when it lists them; undefined when it does not,
   * and then its sessions are taken as held.
   */
  readonly heldSessions?: readonly string[];
}

/** A worker heartbeating now, on whichever replica holds its link. */
export interface LiveWorker extends WorkerOffer {
  /** Checksummed address. */
  readonly address: string;
  readonly linkId: string;
  /** The replica holding the link; hints go through it. */
  readonly replicaId: string;
  readonly expiresAtMs: EpochMs;
}

interface PresenceRecord extends WorkerOffer {
  readonly address: string;
  readonly linkId: string;
  readonly replicaId: string;
}

/** Worker presence in the store: announced on each heartbeat with a TTL, so a silent worker lapses. */
export class WorkerPresence {
  readonly #presence: Presence;

  constructor(presence: Presence) {
    this.#presence = presence;
  }

  announce(record: PresenceRecord, ttlMs: number): Promise<void> {
    const value = JSON.stringify({
      address: record.address,
      linkId: record.linkId,
      replicaId: record.replicaId,
      models: [...record.models],
      freeJobSlots: record.freeJobSlots,
      freeSessionSlots: record.freeSessionSlots,
      ...(record.heldSessions ? { heldSessions: [...record.heldSessions] } : {}),
    });
    return this.#presence.announce(WORKER_PRESENCE_GROUP, memberOf(record.address), value, ttlMs);
  }

  /** Workers heartbeating now, sorted by address; a record that does not parse is skipped. */
  async live(): Promise<LiveWorker[]> {
    const entries = await this.#presence.list(WORKER_PRESENCE_GROUP);
    const workers: LiveWorker[] = [];
    for (const entry of entries) {
      const record = parseRecord(entry.value);
      if (record) workers.push({ ...record, expiresAtMs: entry.expiresAtMs });
    }
    return workers;
  }

  /**
   * Withdraws the worker only while its presence is still this link's: a newer link (on any replica)
   * keeps its entry. Not atomic; a newer link that lost its entry in the gap restores it on its next beat.
   */
  async withdraw(address: string, linkId: string): Promise<void> {
    const current = (await this.live()).find((worker) => worker.address === address);
    if (current?.linkId === linkId) await this.#presence.withdraw(WORKER_PRESENCE_GROUP, memberOf(address));
  }
}

/** Whether the worker can still serve `sessionId`: it holds the session's key, or does not list its keys. */
export function holdsSession(worker: WorkerOffer, sessionId: bigint): boolean {
  return worker.heldSessions === undefined || worker.heldSessions.includes(sessionId.toString());
}

function memberOf(address: string): string {
  return address.toLowerCase();
}

function parseRecord(value: string): PresenceRecord | undefined {
  try {
    const raw = JSON.parse(value) as Partial<PresenceRecord>;
    if (
      typeof raw.address !== 'string' ||
      typeof raw.linkId !== 'string' ||
      typeof raw.replicaId !== 'string' ||
      !Array.isArray(raw.models) ||
      typeof raw.freeJobSlots !== 'number' ||
      typeof raw.freeSessionSlots !== 'number' ||
      (raw.heldSessions !== undefined && !Array.isArray(raw.heldSessions))
    )
      return undefined;
    return raw as PresenceRecord;
  } catch {
    return undefined;
  }
}
