import { randomUUID } from 'node:crypto';
import { renewWhileHeld, type AppError, type ExclusiveLocks, type ExpiringValues } from '@svc/platform';
import type { DebitAuthorizationJson } from '@svc/x402';
import type { PaymentRefusal } from './refusals.js';

/** A verified payment whose nonce is held for one call. */
export interface HeldPayment {
  readonly reservationId: string;
  readonly authorization: DebitAuthorizationJson;
  readonly signature: string;
  /** The fee the requirements named: what settlement is expected to debit. */
  readonly amount: string;
  readonly network: string;
  /** The chain's latest block when the payment verified: its settlement can only come later. */
  readonly verifiedAtBlock: number;
  /** Unix ms. */
  readonly expiresAtMs: number;
}

/** A payment that landed: the debit and the job it submitted. */
export interface Settlement {
  readonly txHash: string;
  readonly jobId: string;
  readonly payer: string;
  readonly amount: string;
  readonly network: string;
  readonly promptBlobHash: string;
  readonly blockNumber: number;
}

type ReservationRecord = HeldPayment & {
  readonly settlement?: Settlement;
  /** The prompt blobs of settlements broadcast for this payment whose outcome is not known yet. */
  readonly sentBlobHashes?: readonly string[];
};

/**
 * How a settlement answered at broadcast ended without landing (the chain refused it, or its model or the
 * registry stopped taking jobs), kept for the ask that follows it up: its caller heard only `broadcast`.
 */
export type SettlementEnding =
  | { readonly refused: PaymentRefusal }
  | { readonly error: { readonly code: AppError['code']; readonly message: string } };

/** `held` when a settlement is under way: the payment may land, so it is not freed. */
export type ReleaseOutcome = 'released' | 'settled' | 'held';

/**
 * How long a settlement's settling lock outlives its replica (renewed while the settlement runs). A send
 * that may still land after its replica died is known from the record's `sentBlobHashes`, noted before
 * the broadcast, so the lock need not outlast the sender's worst case.
 */
const SETTLING_LOCK_TTL_MS = 30_000;
/** The least time a settlement's ending is kept: its caller asks again within seconds. */
const MIN_ENDING_TTL_MS = 60_000;

/**
 * Holds a payment's (payer, nonce) for the one call that verified it, in the shared store so every
 * replica sees it (docs/protocol.md, check 10): a second call with the same payment is refused as used
 * while the first one runs, and the pair is freed when that call ends without the debit landing, so the
 * same `PAYMENT-SIGNATURE` can be sent again. A settled pair stays taken (and the chain marks its nonce
 * used for good).
 *
 * Two keys: the pair, whose value is the holding reservation's id (set-if-absent is the atomic
 * reservation), and the reservation's record (the payment, then its settlement).
 */
export class NonceReservations {
  constructor(
    private readonly values: ExpiringValues,
    private readonly locks: ExclusiveLocks,
    private readonly settledTtlMs: number,
  ) {}

  /**
   * Runs `settle` as the reservation's one settlement under way (over every replica), so a repeat or a
   * release cannot race it; undefined when another is under way.
   */
  async whileSettling<T>(reservationId: string, settle: () => Promise<T>): Promise<{ value: T } | undefined> {
    const holder = randomUUID();
    const key = settlingKey(reservationId);
    if (!(await this.locks.tryAcquire(key, holder, SETTLING_LOCK_TTL_MS)).acquired) return undefined;
    const renewal = renewWhileHeld(SETTLING_LOCK_TTL_MS, () =>
      this.locks.renew(key, holder, SETTLING_LOCK_TTL_MS),
    );
    try {
      return { value: await settle() };
    } finally {
      renewal.stop();
      await this.locks.release(key, holder);
    }
  }

  /** Whether a call holds the pair now, or held it and settled. */
  async isTaken(payer: string, nonce: string): Promise<boolean> {
    return (await this.values.get(pairKey(payer, nonce))) !== null;
  }

  /** Reserves the pair for a new call; undefined when another call holds it (or settled it). */
  async reserve(
    payment: Omit<HeldPayment, 'reservationId' | 'expiresAtMs'>,
    ttlMs: number,
  ): Promise<HeldPayment | undefined> {
    const reservationId = randomUUID();
    const { payer, nonce } = payment.authorization;
    if (!(await this.values.setIfAbsent(pairKey(payer, nonce), reservationId, ttlMs))) return undefined;
    const held: HeldPayment = { ...payment, reservationId, expiresAtMs: Date.now() + ttlMs };
    await this.values.set(recordKey(reservationId), JSON.stringify(held), ttlMs);
    return held;
  }

  /** The reservation's payment and, once settled, its settlement; undefined when it lapsed or was freed. */
  async get(reservationId: string): Promise<ReservationRecord | undefined> {
    const raw = await this.values.get(recordKey(reservationId));
    return raw === null ? undefined : (JSON.parse(raw) as ReservationRecord);
  }

  /**
   * Notes a settlement about to be broadcast with this prompt blob, before it is: a send whose outcome is
   * then lost may land later, and a later settlement of the same reservation (a resend) recognises it.
   */
  async noteSend(held: HeldPayment, promptBlobHash: string): Promise<void> {
    const record = await this.get(held.reservationId);
    if (!record) return;
    const sentBlobHashes = [...new Set([...(record.sentBlobHashes ?? []), promptBlobHash.toLowerCase()])];
    const ttlMs = Math.max(1_000, record.expiresAtMs - Date.now());
    await this.values.set(
      recordKey(held.reservationId),
      JSON.stringify({ ...record, sentBlobHashes }),
      ttlMs,
    );
  }

  /**
   * The reservation of this same signed payment (the same authorization and signature) when it settled or
   * a settlement of it was broadcast: a `PAYMENT-SIGNATURE` sent again after a 502 goes on under it, and
   * its call is given the job that payment paid for, never a second debit. Undefined otherwise.
   */
  async resent(
    authorization: DebitAuthorizationJson,
    signature: string,
  ): Promise<ReservationRecord | undefined> {
    const reservationId = await this.values.get(pairKey(authorization.payer, authorization.nonce));
    if (reservationId === null) return undefined;
    const record = await this.get(reservationId);
    if (!record || record.signature.toLowerCase() !== signature.toLowerCase()) return undefined;
    if (JSON.stringify(record.authorization) !== JSON.stringify(authorization)) return undefined;
    return record.settlement || record.sentBlobHashes?.length ? record : undefined;
  }

  /** Whether the reservation still holds its pair (it did not lapse, and was not freed). */
  async holds(held: HeldPayment): Promise<boolean> {
    const { payer, nonce } = held.authorization;
    return (await this.values.get(pairKey(payer, nonce))) === held.reservationId;
  }

  /** Records the settlement; the pair stays taken for as long as the settlement is remembered. */
  async markSettled(held: HeldPayment, settlement: Settlement): Promise<void> {
    const { payer, nonce } = held.authorization;
    const record: ReservationRecord = { ...held, settlement };
    await this.values.set(recordKey(held.reservationId), JSON.stringify(record), this.settledTtlMs);
    await this.values.set(pairKey(payer, nonce), held.reservationId, this.settledTtlMs);
  }

  /**
   * Frees the pair unless the payment settled, is being settled, or was broadcast with no known outcome;
   * freeing twice, or a lapsed reservation, is a no-op.
   */
  async release(reservationId: string): Promise<ReleaseOutcome> {
    if ((await this.locks.holder(settlingKey(reservationId))) !== null) return 'held';
    const record = await this.get(reservationId);
    if (record?.settlement) return 'settled';
    // A settlement of it was broadcast and its outcome is unknown: it may still land, so the payment stays
    // held (until it lands and a resend finds it, or the reservation lapses).
    if (record?.sentBlobHashes?.length) return 'held';
    if (record) await this.free(record);
    return 'released';
  }

  /** Frees the pair of a payment that did not settle: the settlement itself, which knows nothing landed. */
  async free(held: HeldPayment): Promise<void> {
    const { payer, nonce } = held.authorization;
    await this.values.compareAndDelete(pairKey(payer, nonce), held.reservationId);
    await this.values.delete(recordKey(held.reservationId));
  }

  /**
   * Frees the pair of a settlement answered at broadcast that did not land, keeping how it ended for as
   * long as the reservation would have lasted: the ask that follows it up is told that, not that the
   * reservation lapsed.
   */
  async freeEnded(held: HeldPayment, ending: SettlementEnding): Promise<void> {
    const ttlMs = Math.max(MIN_ENDING_TTL_MS, held.expiresAtMs - Date.now());
    await this.values.set(endingKey(held.reservationId), JSON.stringify(ending), ttlMs);
    await this.free(held);
  }

  /** How a settlement of the reservation answered at broadcast ended without landing, if one did. */
  async endingOf(reservationId: string): Promise<SettlementEnding | undefined> {
    const raw = await this.values.get(endingKey(reservationId));
    return raw === null ? undefined : (JSON.parse(raw) as SettlementEnding);
  }
}

function pairKey(payer: string, nonce: string): string {
  return `payments:nonce:${payer.toLowerCase()}:${nonce.toLowerCase()}`;
}

function settlingKey(reservationId: string): string {
  return `payments:settling:${reservationId}`;
}

function recordKey(reservationId: string): string {
  return `payments:reservation:${reservationId}`;
}

function endingKey(reservationId: string): string {
  return `payments:ending:${reservationId}`;
}
