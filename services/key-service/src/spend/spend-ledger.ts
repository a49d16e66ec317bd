import { randomUUID } from 'node:crypto';
import { AppError } from '@svc/platform';
import { inTransaction, type PrismaClient } from '../db/database.js';
import { isKeyId } from '../keys/key-id.js';
import type { KeyServiceMetrics } from '../observability/key-service-metrics.js';

export type ReservationState = 'held' | 'committed' | 'released' | 'refunded';
/** Who settled a reservation, kept for the audit trail. */
export type Settler = 'gateway' | 'event' | 'sweeper';

export interface SpendReservation {
  readonly reservationId: string;
  readonly expiresAt: Date;
}

export interface SpendCapRefusal {
  readonly spendCapWei: bigint;
  readonly spentWei: bigint;
  readonly reservedWei: bigint;
}

export type ReserveOutcome =
  | { readonly outcome: 'reserved'; readonly reservation: SpendReservation }
  | { readonly outcome: 'refused'; readonly refusal: SpendCapRefusal };

export interface ReserveRequest {
  readonly keyId: string;
  readonly amountWei: bigint;
  /** How long the hold lasts unsettled; undefined takes the default. */
  readonly ttlMs?: number;
  /** The caller's id of the call: a repeated reservation of one call returns the first one. */
  readonly requestId: string;
}

export interface SpendLedgerSettings {
  readonly defaultTtlMs: number;
  readonly maxTtlMs: number;
}

const MAX_REQUEST_ID_LENGTH = 128;

/** Thrown inside a reservation transaction to roll it back when the fee does not fit. */
class DoesNotFit extends Error {}

/** A refusal whose key has no cap by the time it is explained: the cap was removed meanwhile. */
const CAP_REMOVED = Symbol('cap removed');

/**
 * Spend against a key's lifetime cap. A call's fee is held (`reserved_wei`) before it runs and settled:
 * committed at the fee charged when it was answered, released when it authoritatively was not (or its TTL
 * passed). A release is final for the hold but not for spend: a commit after it still counts the fee. A refund
 * on chain is final for both: whatever came before, the fee is not spent, and no later commit counts it. The cap
 * check and the hold are one conditional UPDATE of the key's row, which PostgreSQL re-checks against the
 * latest row after waiting for its lock, so concurrent reservations can never together pass the cap.
 * Expiry times come from the database clock, so replicas with skewed clocks agree.
 */
export class SpendLedger {
  constructor(
    private readonly db: PrismaClient,
    private readonly settings: SpendLedgerSettings,
    private readonly metrics: KeyServiceMetrics,
  ) {}

  async reserve(request: ReserveRequest): Promise<ReserveOutcome> {
    const result = await this.#reserve(request);
    this.metrics.spendReserved(result.outcome === 'reserved' ? 'reserved' : 'over_cap');
    return result;
  }

  async #reserve(request: ReserveRequest): Promise<ReserveOutcome> {
    const { keyId, amountWei, requestId } = request;
    if (requestId === '' || requestId.length > MAX_REQUEST_ID_LENGTH) {
      throw new AppError('invalid_request', {
        message: `request_id must be 1 to ${MAX_REQUEST_ID_LENGTH} characters.`,
      });
    }
    if (!isKeyId(keyId)) throw new AppError('invalid_api_key');
    const ttlMs = this.ttlOf(request.ttlMs);
    // A refused hold is tried once more if the key turns out to have no cap any more (removed meanwhile).
    for (let attempt = 1; attempt <= 2; attempt += 1) {
      const outcome = await this.tryReserve(keyId, amountWei, ttlMs, requestId);
      if (outcome !== CAP_REMOVED) return outcome;
    }
    throw new AppError('internal', { message: 'A spend reservation was refused under no cap.' });
  }

  private async tryReserve(
    keyId: string,
    amountWei: bigint,
    ttlMs: number,
    requestId: string,
  ): Promise<ReserveOutcome | typeof CAP_REMOVED> {
    const amount = amountWei.toString();
    try {
      const reservation = await inTransaction(this.db, async (tx) => {
        const inserted = await tx.$queryRaw<Array<{ id: string; expires_at: Date }>>`
          INSERT INTO spend_reservations (id, key_id, request_id, amount_wei, state, expires_at)
          SELECT ${randomUUID()}::uuid, k.id, ${requestId}, ${amount}::numeric, 'held',
                 now() + ${ttlMs} * interval '1 millisecond'
          FROM api_keys k WHERE k.id = ${keyId}::uuid
          ON CONFLICT (key_id, request_id) DO NOTHING
          RETURNING id::text, expires_at`;
        const created = inserted[0];
        if (!created) return null;
        const held = await tx.$executeRaw`
          UPDATE api_keys SET reserved_wei = reserved_wei + ${amount}::numeric
          WHERE id = ${keyId}::uuid AND revoked_at IS NULL AND deleted_at IS NULL
            AND (spend_cap_wei IS NULL OR spent_wei + reserved_wei + ${amount}::numeric <= spend_cap_wei)`;
        if (held !== 1) throw new DoesNotFit();
        return { reservationId: created.id, expiresAt: created.expires_at };
      });
      if (reservation) return { outcome: 'reserved', reservation };
      return { outcome: 'reserved', reservation: await this.earlierReservation(keyId, requestId) };
    } catch (error) {
      if (!(error instanceof DoesNotFit)) throw error;
      const refusal = await this.refusalOf(keyId);
      return refusal === CAP_REMOVED ? CAP_REMOVED : { outcome: 'refused', refusal };
    }
  }

  /**
   * Counts the reservation as spent at `chargedWei` (at most the amount reserved). Spend is a fact, not a
   * hold: a commit that comes after the reservation was released (by the gateway, an event or the sweeper)
   * still adds the fee to `spent_wei`, since the job ran and the wallet paid; only the hold itself is not
   * given back twice. The first commit wins; a repeated one changes nothing.
   */
  async commit(
    reservationId: string,
    chargedWei: bigint | undefined,
    settler: Settler,
  ): Promise<ReservationState> {
    const held = await this.heldReservation(reservationId);
    const charged = chargedWei ?? held.amountWei;
    if (charged > held.amountWei) {
      throw new AppError('invalid_request', {
        message: `charged_wei ${charged} is more than the ${held.amountWei} wei reserved.`,
      });
    }
    // `target` locks the row and reads its state as of the lock (a concurrent release that won the lock
    // first is seen as 'released'), so the hold is subtracted exactly once.
    const settled = await this.db.$queryRaw<unknown[]>`
      WITH target AS (
        SELECT id, key_id, amount_wei, state AS previous_state FROM spend_reservations
        WHERE id = ${reservationId}::uuid AND state IN ('held', 'released')
        FOR UPDATE
      ), settled AS (
        UPDATE spend_reservations r
        SET state = 'committed', charged_wei = ${charged.toString()}::numeric, settled_at = now(), settled_by = ${settler}
        FROM target t WHERE r.id = t.id
        RETURNING t.key_id, t.amount_wei, t.previous_state, r.charged_wei
      )
      UPDATE api_keys k
      SET reserved_wei = k.reserved_wei - CASE WHEN s.previous_state = 'held' THEN s.amount_wei ELSE 0 END,
          spent_wei = k.spent_wei + s.charged_wei
      FROM settled s WHERE k.id = s.key_id
      RETURNING k.id`;
    const state = settled.length === 1 ? 'committed' : await this.stateOf(reservationId);
    this.metrics.spendSettled('commit', settler, state);
    return state;
  }

  /**
   * Keeps a held reservation from lapsing while its job is known to be live: its expiry moves to at least
   * the default TTL from now (never earlier than it was). Returns whether a held reservation was found.
   */
  async extend(reservationId: string): Promise<boolean> {
    if (!isKeyId(reservationId)) return false;
    const extended = await this.db.$executeRaw`
      UPDATE spend_reservations
      SET expires_at = greatest(expires_at, now() + ${this.settings.defaultTtlMs} * interval '1 millisecond')
      WHERE id = ${reservationId}::uuid AND state = 'held'`;
    return extended === 1;
  }

  /** Gives a held reservation back; the first settlement wins. */
  async release(reservationId: string, settler: Settler): Promise<ReservationState> {
    await this.heldReservation(reservationId);
    const settled = await this.db.$queryRaw<unknown[]>`
      WITH settled AS (
        UPDATE spend_reservations
        SET state = 'released', settled_at = now(), settled_by = ${settler}
        WHERE id = ${reservationId}::uuid AND state = 'held'
        RETURNING key_id, amount_wei
      )
      UPDATE api_keys k SET reserved_wei = k.reserved_wei - s.amount_wei
      FROM settled s WHERE k.id = s.key_id
      RETURNING k.id`;
    const state = settled.length === 1 ? 'released' : await this.stateOf(reservationId);
    this.metrics.spendSettled('release', settler, state);
    return state;
  }

  /**
   * The call's job was refunded on chain: nothing is spent, whatever came before. A hold is given back, a
   * commit taken back (a fast-path answer whose worker never committed it, a dispute won after the answer
   * was delivered: the gateway counted the fee at delivery), and a released reservation is marked so that
   * no commit arriving later counts it. Idempotent.
   */
  async refund(reservationId: string, settler: Settler): Promise<ReservationState> {
    await this.heldReservation(reservationId);
    // Separate statements under the row lock, not one statement whose CTE waits for it: after waiting on a
    // commit that also moved the key's totals, such a statement read the key's row as before that commit.
    const refunded = await inTransaction(this.db, async (tx) => {
      const [reservation] = await tx.$queryRaw<
        Array<{ key_id: string; amount_wei: string; charged_wei: string | null; state: ReservationState }>
      >`
        SELECT key_id::text, amount_wei::text, charged_wei::text, state FROM spend_reservations
        WHERE id = ${reservationId}::uuid FOR UPDATE`;
      if (!reservation || reservation.state === 'refunded') return false;
      await tx.$executeRaw`
        UPDATE spend_reservations SET state = 'refunded', settled_at = now(), settled_by = ${settler}
        WHERE id = ${reservationId}::uuid`;
      const held = reservation.state === 'held' ? reservation.amount_wei : '0';
      const spent = reservation.state === 'committed' ? (reservation.charged_wei ?? '0') : '0';
      await tx.$executeRaw`
        UPDATE api_keys SET reserved_wei = reserved_wei - ${held}::numeric, spent_wei = spent_wei - ${spent}::numeric
        WHERE id = ${reservation.key_id}::uuid`;
      return true;
    });
    const state = refunded ? 'refunded' : await this.stateOf(reservationId);
    this.metrics.spendSettled('refund', settler, state);
    return state;
  }

  /**
   * Releases up to `limit` reservations whose TTL passed, in one statement. Rows another replica's sweep
   * (or a settlement) holds are skipped, so several replicas may sweep at once.
   */
  async releaseLapsed(limit: number): Promise<number> {
    const released = await this.db.$queryRaw<Array<{ released: bigint }>>`
      WITH lapsed AS (
        SELECT id FROM spend_reservations
        WHERE state = 'held' AND expires_at <= now()
        ORDER BY expires_at LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      ), settled AS (
        UPDATE spend_reservations r SET state = 'released', settled_at = now(), settled_by = 'sweeper'
        FROM lapsed WHERE r.id = lapsed.id
        RETURNING r.key_id, r.amount_wei
      ), per_key AS (
        SELECT key_id, sum(amount_wei) AS total, count(*) AS released FROM settled GROUP BY key_id
      )
      UPDATE api_keys k SET reserved_wei = k.reserved_wei - p.total
      FROM per_key p WHERE k.id = p.key_id
      RETURNING p.released`;
    const count = released.reduce((sum, row) => sum + Number(row.released), 0);
    if (count > 0) this.metrics.spendSettled('release', 'sweeper', 'released', count);
    return count;
  }

  private ttlOf(requested: number | undefined): number {
    if (requested === undefined || requested === 0) return this.settings.defaultTtlMs;
    if (!Number.isFinite(requested) || requested < 0 || requested > this.settings.maxTtlMs) {
      throw new AppError('invalid_request', {
        message: `ttl must be positive and at most ${this.settings.maxTtlMs} ms.`,
      });
    }
    return Math.ceil(requested);
  }

  private async earlierReservation(keyId: string, requestId: string): Promise<SpendReservation> {
    const existing = await this.db.spendReservation.findUnique({
      where: { keyId_requestId: { keyId, requestId } },
      select: { id: true, expiresAt: true },
    });
    // No reservation and none inserted: the key does not exist.
    if (!existing) throw new AppError('invalid_api_key');
    return { reservationId: existing.id, expiresAt: existing.expiresAt };
  }

  /** Why the hold was refused. */
  private async refusalOf(keyId: string): Promise<SpendCapRefusal | typeof CAP_REMOVED> {
    const key = await this.db.apiKey.findUnique({
      where: { id: keyId },
      select: { spendCapWei: true, spentWei: true, reservedWei: true, revokedAt: true, deletedAt: true },
    });
    if (!key || key.revokedAt !== null || key.deletedAt !== null) throw new AppError('invalid_api_key');
    if (key.spendCapWei === null) return CAP_REMOVED;
    return {
      spendCapWei: BigInt(key.spendCapWei.toFixed()),
      spentWei: BigInt(key.spentWei.toFixed()),
      reservedWei: BigInt(key.reservedWei.toFixed()),
    };
  }

  private async heldReservation(reservationId: string): Promise<{ amountWei: bigint }> {
    const reservation = isKeyId(reservationId)
      ? await this.db.spendReservation.findUnique({
          where: { id: reservationId },
          select: { amountWei: true },
        })
      : null;
    if (!reservation) throw new UnknownReservationError(reservationId);
    return { amountWei: BigInt(reservation.amountWei.toFixed()) };
  }

  private async stateOf(reservationId: string): Promise<ReservationState> {
    const reservation = await this.db.spendReservation.findUnique({
      where: { id: reservationId },
      select: { state: true },
    });
    return (reservation?.state ?? 'released') as ReservationState;
  }
}

/** A settlement named a reservation that does not exist (e.g. a per-call payment's, on a lifecycle event). */
export class UnknownReservationError extends AppError {
  constructor(reservationId: string) {
    super('invalid_request', { message: `No spend reservation ${JSON.stringify(reservationId)}.` });
  }
}
