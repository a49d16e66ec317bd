import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';
import type { Store } from '@svc/platform';

/** Outlives a payment's reservation, its job's deadline and a client's resend by far. */
const ESCROW_TTL_MS = 30 * 60_000;
/** As long as the payment-settler remembers a settlement (SETTLED_PAYMENT_TTL). */
const ANSWERED_TTL_MS = 24 * 3_600_000;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/**
 * The reply keys of the calls made with one per-call payment, kept in the shared store (sealed with a key
 * only the job-orchestrators derive, so the store alone reads no answer). A payment whose settlement
 * landed after its first call gave up (a 502 on a slow chain) is resent by its client: the settler hands
 * the resend that payment's job, whose prompt carries the first call's reply key, and the resend's relay
 * opens the answer with it.
 */
export class ReplyKeyEscrow {
  readonly #sealingKey: Buffer;

  constructor(
    private readonly store: Pick<Store, 'presence' | 'values'>,
    /** Secret material of this deployment's orchestrators (the service signer's private key). */
    secret: Uint8Array,
  ) {
    this.#sealingKey = Buffer.from(hkdfSync('sha256', secret, 'svc', 'svc/reply-key-escrow/v1', 32));
  }

  async remember(paymentReservationId: string, callId: string, replyKey: Uint8Array): Promise<void> {
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#sealingKey, nonce);
    cipher.setAAD(Buffer.from(paymentReservationId));
    const sealed = Buffer.concat([nonce, cipher.update(replyKey), cipher.final(), cipher.getAuthTag()]);
    await this.store.presence.announce(
      groupOf(paymentReservationId),
      callId,
      sealed.toString('base64'),
      ESCROW_TTL_MS,
    );
  }

  /** Marks the payment's job as answered to a caller (a resend is then refused as used). */
  markAnswered(paymentReservationId: string): Promise<void> {
    return markAnswered(this.store, paymentReservationId);
  }

  /** Whether a call was answered with the payment's job. */
  wasAnswered(paymentReservationId: string): Promise<boolean> {
    return wasAnswered(this.store, paymentReservationId);
  }

  /** Every reply key remembered for the payment (those that do not open are skipped). */
  async recall(paymentReservationId: string): Promise<Uint8Array[]> {
    const keys: Uint8Array[] = [];
    for (const entry of await this.store.presence.list(groupOf(paymentReservationId))) {
      try {
        const sealed = Buffer.from(entry.value, 'base64');
        const decipher = createDecipheriv('aes-256-gcm', this.#sealingKey, sealed.subarray(0, NONCE_BYTES));
        decipher.setAAD(Buffer.from(paymentReservationId));
        decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
        keys.push(
          Buffer.concat([
            decipher.update(sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)),
            decipher.final(),
          ]),
        );
      } catch {
        // Sealed by another deployment's secret, or damaged: not a key of ours.
      }
    }
    return keys;
  }
}

/** Marks the payment's job as answered to a caller: a resend of it is then refused as used, as before. */
export async function markAnswered(
  store: Pick<Store, 'values'>,
  paymentReservationId: string,
): Promise<void> {
  await store.values.set(answeredKeyOf(paymentReservationId), '1', ANSWERED_TTL_MS);
}

export async function wasAnswered(
  store: Pick<Store, 'values'>,
  paymentReservationId: string,
): Promise<boolean> {
  return (await store.values.get(answeredKeyOf(paymentReservationId))) !== null;
}

function answeredKeyOf(paymentReservationId: string): string {
  return `per-call:answered:${paymentReservationId}`;
}

function groupOf(paymentReservationId: string): string {
  return `per-call:reply-keys:${paymentReservationId}`;
}
