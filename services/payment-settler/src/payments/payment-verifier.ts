import { recoverAddress, TypedDataEncoder } from 'ethers';
import { chainTimeAfter, type ChainClient } from '@svc/chain';
import { DEBIT_AUTHORIZATION_TYPES, debitDomain } from '@svc/contracts';
import { AppError, type PaymentRefusalCode } from '@svc/platform';
import {
  debitAuthorizationOf,
  readPaymentSignature,
  sameRequirements,
  type DebitAuthorizationJson,
  type PaymentPayload,
  type PrepaidDebitRequirements,
} from '@svc/x402';
import type { PaymentSettlerMetrics } from '../observability/payment-settler-metrics.js';
import type { HeldPayment, NonceReservations } from './nonce-reservations.js';
import { sameAddress, type PaymentTerms } from './payment-terms.js';
import type { PaymentRefusal } from './refusals.js';

/** Half the secp256k1 group order: a signature's `s` above it is the malleable twin JobRegistry refuses. */
const SECP256K1_HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

export type Verdict =
  | { readonly verified: HeldPayment; readonly maxAmount: bigint; readonly deadline: bigint }
  /** `current`: the requirements the payment was judged against, once they were read. */
  | { readonly refused: PaymentRefusal; readonly current?: PrepaidDebitRequirements };

/**
 * Verifies a `PAYMENT-SIGNATURE` in the protocol's check order (docs/protocol.md, Check order and codes);
 * the first failure decides the code. The chain is read for the fee, the facilitator's authorization,
 * the nonce and the payer's balance, in parallel, and judged in order afterwards. A good payment's
 * (payer, nonce) is reserved last, atomically: of two calls with one payment, one proceeds.
 */
export class PaymentVerifier {
  constructor(
    private readonly chain: ChainClient,
    private readonly terms: PaymentTerms,
    private readonly reservations: NonceReservations,
    private readonly metrics: PaymentSettlerMetrics,
  ) {}

  async verify(paymentSignature: string, model: string, reservationTtlMs: number): Promise<Verdict> {
    try {
      const verdict = await this.#verify(paymentSignature, model, reservationTtlMs);
      this.metrics.verified('refused' in verdict ? verdict.refused.code : undefined);
      return verdict;
    } catch (error) {
      this.metrics.verifyFailed(error);
      throw error;
    }
  }

  async #verify(paymentSignature: string, model: string, reservationTtlMs: number): Promise<Verdict> {
    const read = readPaymentSignature(paymentSignature);
    if (!read.ok) return refuse(read.code, read.message);
    const { payment } = read;
    const payer = payment.payload.authorization.payer;
    const checked = await this.#firstFailure(payment, model).catch((error: unknown) => {
      if (error instanceof AppError) throw error;
      throw new AppError('unexpected_verify_error', {
        message: 'The payment could not be checked against the chain; send the same PAYMENT-SIGNATURE again.',
        cause: error,
      });
    });
    if ('refusal' in checked) {
      if (checked.refusal.code === 'invalid_prepaid_debit_payload_nonce_used') {
        // The same payment sent again (after a 502, as the error told its client): it goes on under the
        // reservation that settled it, and its call is given that payment's job, not refused as used.
        const { authorization, signature } = payment.payload;
        const earlier = await this.reservations.resent(authorization, signature);
        if (earlier)
          return {
            verified: earlier,
            maxAmount: BigInt(authorization.maxAmount),
            deadline: BigInt(authorization.deadline),
          };
      }
      return { refused: { ...checked.refusal, payer }, current: checked.current };
    }
    const { authorization, signature } = payment.payload;
    const held = await this.reservations.reserve(
      {
        authorization,
        signature,
        amount: payment.accepted.amount,
        network: payment.accepted.network,
        verifiedAtBlock: checked.block,
      },
      reservationTtlMs,
    );
    if (!held)
      return {
        refused: { code: 'invalid_prepaid_debit_payload_nonce_used', message: NONCE_IN_USE, payer },
        current: checked.current,
      };
    return {
      verified: held,
      maxAmount: BigInt(authorization.maxAmount),
      deadline: BigInt(authorization.deadline),
    };
  }

  /**
   * Checks 4 to 13: the first failure, or the block they were read at when the payment passes them all;
   * with the current requirements once they were read.
   */
  async #firstFailure(
    payment: PaymentPayload,
    model: string,
  ): Promise<
    | { refusal: Omit<PaymentRefusal, 'payer'>; current?: PrepaidDebitRequirements }
    | { block: number; current: PrepaidDebitRequirements }
  > {
    if (payment.accepted.network !== this.terms.network)
      return failure(
        'invalid_network',
        `This server settles on ${this.terms.network}, not ${payment.accepted.network}.`,
      );
    const current = await this.terms.requirementsFor(model);
    return { ...(await this.#judge(payment, current)), current };
  }

  /** Checks 5 to 13 against the current requirements. */
  async #judge(
    payment: PaymentPayload,
    current: PrepaidDebitRequirements,
  ): Promise<{ refusal: Omit<PaymentRefusal, 'payer'> } | { block: number }> {
    const { parties } = this.terms;
    const authorization = payment.payload.authorization;
    if (!sameRequirements(payment.accepted, current))
      return failure(
        'invalid_payment_requirements',
        'accepted is not the current payment requirements (the fee may have changed): rebuild the payment from PAYMENT-REQUIRED.',
      );
    const [latest, facilitatorAuthorized, nonceUsedOnChain, nonceHeld, balance] = await Promise.all([
      this.chain.provider.getBlock('latest'),
      this.terms.facilitatorAuthorized(),
      this.chain.isNonceUsed(authorization.payer, authorization.nonce),
      this.reservations.isTaken(authorization.payer, authorization.nonce),
      this.chain.prepaidBalanceOf(authorization.payer),
    ]);
    const fee = BigInt(current.amount);
    const now = chainTimeAfter(latest);
    if (BigInt(authorization.deadline) < BigInt(now))
      return failure(
        'invalid_prepaid_debit_payload_expired',
        `The payment's deadline ${authorization.deadline} has passed.`,
      );
    if (!sameAddress(authorization.facilitator, parties.facilitator))
      return failure(
        'invalid_prepaid_debit_payload_facilitator_mismatch',
        `The payment names facilitator ${authorization.facilitator}; this server's is ${parties.facilitator}.`,
      );
    if (!sameAddress(authorization.payTo, parties.payTo))
      return failure(
        'invalid_prepaid_debit_payload_recipient_mismatch',
        `The payment names payTo ${authorization.payTo}; this server's is ${parties.payTo}.`,
      );
    if (!facilitatorAuthorized)
      return failure(
        'invalid_prepaid_debit_facilitator_not_authorized',
        "This server's per-call setup is incomplete (its facilitator is not authorized); pay with an API key meanwhile.",
      );
    if (nonceUsedOnChain || nonceHeld)
      return failure('invalid_prepaid_debit_payload_nonce_used', NONCE_IN_USE);
    if (!this.#signedByPayer(authorization, payment.payload.signature))
      return failure(
        'invalid_prepaid_debit_payload_signature',
        "The signature does not recover to the payer over this chain's JobRegistry domain (or its s is not low).",
      );
    if (fee > BigInt(authorization.maxAmount))
      return failure(
        'invalid_prepaid_debit_payload_over_cap',
        `The fee ${fee} wei is above the payment's maxAmount ${authorization.maxAmount}.`,
      );
    if (balance < fee)
      return failure(
        'insufficient_funds',
        `The payer's prepaid balance (${balance} wei) cannot cover the fee (${fee} wei): deposit() from the payer's wallet.`,
      );
    return { block: latest?.number ?? 0 };
  }

  /** EIP-712 recovery as JobRegistry does it (OpenZeppelin ECDSA): 65 bytes, v 27 or 28, low s. */
  #signedByPayer(authorization: DebitAuthorizationJson, signature: string): boolean {
    const bytes = Buffer.from(signature.slice(2), 'hex');
    const r = `0x${bytes.subarray(0, 32).toString('hex')}`;
    const s = `0x${bytes.subarray(32, 64).toString('hex')}`;
    const v = bytes[64]!;
    if ((v !== 27 && v !== 28) || BigInt(s) > SECP256K1_HALF_ORDER) return false;
    const digest = TypedDataEncoder.hash(
      debitDomain(this.terms.parties.chainId, this.chain.addresses.jobRegistry),
      DEBIT_AUTHORIZATION_TYPES,
      debitAuthorizationOf(authorization),
    );
    try {
      return sameAddress(recoverAddress(digest, { r, s, v }), authorization.payer);
    } catch {
      return false;
    }
  }
}

const NONCE_IN_USE =
  'This payment was already used, or is being settled by another call: sign a new one with a fresh nonce.';

function failure(code: PaymentRefusalCode, message: string): { refusal: Omit<PaymentRefusal, 'payer'> } {
  return { refusal: { code, message } };
}

function refuse(code: PaymentRefusalCode, message: string, payer?: string): Verdict {
  return { refused: { code, message, ...(payer ? { payer } : {}) } };
}
