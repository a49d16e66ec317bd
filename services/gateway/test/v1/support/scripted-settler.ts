import { AppError, type PaymentRefusalCode } from '@svc/platform';
import { readPaymentSignature, type PrepaidDebitRequirements } from '@svc/x402';
import type {
  PaymentOffer,
  PaymentSettlerPort,
  PaymentVerdict,
  VerifiedPayment,
} from '../../../src/v1/per-call/payment-settler-port.js';
import { FEE_WEI } from './scripted-backend.js';

/** The settler's one `prepaid-debit` entry, whatever the model (its fee is the scripted backend's). */
export const REQUIREMENTS: PrepaidDebitRequirements = {
  scheme: 'prepaid-debit',
  network: 'eip155:31337',
  amount: FEE_WEI.toString(),
  asset: `0x${'44'.repeat(20)}`,
  payTo: `0x${'55'.repeat(20)}`,
  maxTimeoutSeconds: 120,
  extra: { name: 'JobRegistry', version: '1', facilitatorAddress: `0x${'66'.repeat(20)}` },
};

export const RESOURCE_DESCRIPTION = 'A scripted chat completion';

/**
 * A payment-settler of our own port, standing in for the real one:
 * - `requirements` answers REQUIREMENTS, `model_not_found` for the model `missing`, and
 *   `unexpected_verify_error` while `requirementsDown` is set;
 * - `verify` reads the payload with @svc/x402 (a payload that does not read is refused with its code),
 *   refuses a payer scripted with `refuse`, refuses a nonce held by another reservation as used, and else
 *   reserves the nonce; `release` frees it, so the same payment verifies again, as on the real settler.
 * Every verification and release is recorded.
 */
export class ScriptedSettler implements PaymentSettlerPort {
  readonly verified: VerifiedPayment[] = [];
  /** Reservation ids, in the order they were released. */
  readonly released: string[] = [];
  /** Resource URLs the requirements were asked for. */
  readonly requirementUrls: string[] = [];
  requirementsDown = false;
  /** A settler with no facilitator: it states no requirements (`unsupported_scheme`). */
  takesNoPayments = false;
  readonly #refusals = new Map<string, PaymentRefusalCode>();
  /** Nonces held, by reservation id. */
  readonly #held = new Map<string, string>();
  #reservations = 0;

  /** Refuses every payment of `payer` with `code`. */
  refuse(payer: string, code: PaymentRefusalCode): void {
    this.#refusals.set(payer.toLowerCase(), code);
  }

  /** The verified payments of one payer. */
  verifiedFor(payer: string): VerifiedPayment[] {
    return this.verified.filter((payment) => payment.payer.toLowerCase() === payer.toLowerCase());
  }

  async requirements(model: string, resourceUrl: string): Promise<PaymentOffer> {
    this.requirementUrls.push(resourceUrl);
    if (this.requirementsDown) throw new AppError('unexpected_verify_error');
    if (this.takesNoPayments) throw new AppError('unsupported_scheme');
    if (model === 'missing') throw new AppError('model_not_found');
    return {
      requirements: REQUIREMENTS,
      resource: { url: resourceUrl, description: RESOURCE_DESCRIPTION, mimeType: 'application/json' },
    };
  }

  async verify(paymentSignature: string): Promise<PaymentVerdict> {
    const read = readPaymentSignature(paymentSignature);
    if (!read.ok)
      return {
        case: 'refused',
        value: { code: read.code, message: read.message, currentRequirements: REQUIREMENTS },
      };
    const { payer, nonce } = read.payment.payload.authorization;
    const scripted = this.#refusals.get(payer.toLowerCase());
    if (scripted !== undefined)
      return {
        case: 'refused',
        value: {
          code: scripted,
          message: `Scripted refusal: ${scripted}.`,
          payer,
          currentRequirements: REQUIREMENTS,
        },
      };
    if ([...this.#held.values()].includes(nonce.toLowerCase()))
      return {
        case: 'refused',
        value: {
          code: 'invalid_prepaid_debit_payload_nonce_used',
          message: 'The payment nonce was already used.',
          payer,
          currentRequirements: REQUIREMENTS,
        },
      };
    this.#reservations += 1;
    const payment: VerifiedPayment = {
      reservationId: `payment-reservation-${this.#reservations}`,
      payer,
      nonce,
      amountWei: BigInt(REQUIREMENTS.amount),
      network: REQUIREMENTS.network,
    };
    this.#held.set(payment.reservationId, nonce.toLowerCase());
    this.verified.push(payment);
    return { case: 'verified', value: payment };
  }

  async release(reservationId: string): Promise<void> {
    this.released.push(reservationId);
    this.#held.delete(reservationId);
  }
}
