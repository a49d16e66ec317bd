import { setTimeout as sleep } from 'node:timers/promises';
import { AppError } from '@svc/platform';
import type { PrepaidDebitPayment } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import {
  JobLifecycleKind,
  type CallIdentity,
  type LifecyclePublisher,
} from '../../events/lifecycle-events.js';
import type { PerCallSettlement } from '../per-call-settlement.js';
import type { ReplyKeyEscrow } from '../reply-key-escrow.js';
import { NotSubmitted, SubmissionUnknown, type PaymentPath, type Submission } from './payment-path.js';
import { invalidRequest, isAddress, isWei } from './request-fields.js';

/** Waits before asking the settler again about a settlement whose outcome it could not tell (the last repeats). */
const SETTLEMENT_RECHECKS_MS = [500, 1_000, 2_000, 4_000, 5_000];
/** How long an unknown outcome is waited for by default: the settler's default payment reservation. */
const SETTLEMENT_OUTCOME_WAIT_MS = 5 * 60_000;

export interface PerCallPathDependencies {
  /** Settles per-call payments; undefined when this server takes none. */
  readonly perCall: PerCallSettlement | undefined;
  readonly lifecycle: Pick<LifecyclePublisher, 'publish'>;
  /** The service's principal: the owner of the sessions per-call jobs run in (the payments' `payTo`). */
  readonly principal: string;
  /** Waits before asking the settler again about a settlement whose outcome it could not tell; the last repeats. */
  readonly settlementRechecksMs?: readonly number[];
  /**
   * How long to keep asking while the outcome stays unknown (a send still in flight under the settler's
   * lock, a settler not heard): as long as the settler holds the payment. The listed rechecks are always
   * made; past them, the last wait repeats until this much time has gone by.
   */
  readonly settlementOutcomeWaitMs?: number;
  /** Reply keys by payment, so a resent payment's call reads the job an earlier call's prompt started. */
  readonly replyKeys?: Pick<ReplyKeyEscrow, 'remember' | 'recall' | 'markAnswered' | 'wasAnswered'>;
}

/** The request's verified x402 payment, as the payment-settler holds its nonce. */
export interface PrepaidDebitTerms {
  readonly paymentReservationId: string;
  readonly payer: string;
  readonly amountWei: bigint;
  /** The API key sent beside the payment, if any, and its spend reservation. */
  readonly keyId?: string;
  readonly spendReservationId?: string;
}

/**
 * A call paid per call: the payment-settler verified the payment and holds its nonce; the settlement
 * debits the payer and submits the job in a session the service owns (`submitJobWithDebit`), so nothing
 * can be on chain before the settler was asked.
 */
export class PerCallPath implements PaymentPath {
  readonly identity: CallIdentity;
  #settleAsked = false;

  constructor(
    private readonly deps: PerCallPathDependencies,
    private readonly terms: PrepaidDebitTerms,
    private readonly call: { readonly requestId: string; readonly model: string },
  ) {
    this.identity = {
      reservationId: terms.spendReservationId || terms.paymentReservationId,
      requestId: call.requestId,
      paymentPath: 'prepaid_debit',
      payer: terms.payer,
      keyId: terms.keyId ?? '',
      model: call.model,
      paymentReservationId: terms.paymentReservationId,
    };
  }

  /** The request's terms, checked again (internal calls do not take the caller's word), or why not. */
  static termsOf(payment: PrepaidDebitPayment): PrepaidDebitTerms | AppError {
    const { payer, amountWei, paymentReservationId, keyId, spendReservationId } = payment;
    if (!isAddress(payer?.hex)) return invalidRequest('payment.payer is not an address');
    if (!isWei(amountWei?.decimal)) return invalidRequest('payment.amount_wei is not a decimal amount');
    if (!paymentReservationId) return invalidRequest('payment.payment_reservation_id is empty');
    if (Boolean(keyId) !== Boolean(spendReservationId))
      return invalidRequest('payment.key_id and payment.spend_reservation_id come together');
    return {
      paymentReservationId,
      payer: payer.hex,
      amountWei: BigInt(amountWei.decimal),
      ...(keyId ? { keyId, spendReservationId } : {}),
    };
  }

  get sessionOwner(): string {
    return this.deps.principal;
  }

  async checkPayable(): Promise<void> {
    // The settler checked the payment; the settlement checks it again on chain.
    if (!this.deps.perCall)
      throw new AppError('unsupported_scheme', { message: 'This server takes no per-call payments.' });
  }

  async submit(sessionId: bigint, promptWire: Uint8Array, replyKey: Uint8Array): Promise<Submission> {
    const perCall = this.deps.perCall!;
    const { replyKeys } = this.deps;
    const { paymentReservationId } = this.terms;
    // Before anything can land: a resend of this payment may have to read the job this prompt starts.
    await replyKeys?.remember(paymentReservationId, this.call.requestId, replyKey);
    this.#settleAsked = true;
    const settling = {
      paymentReservationId: this.terms.paymentReservationId,
      sessionId,
      promptWire,
      requestId: this.call.requestId,
    };
    const rechecks = this.deps.settlementRechecksMs ?? SETTLEMENT_RECHECKS_MS;
    const waitUntil = Date.now() + (this.deps.settlementOutcomeWaitMs ?? SETTLEMENT_OUTCOME_WAIT_MS);
    let outcome = await perCall.settle(settling);
    // An unknown outcome may be a settlement that landed unheard or a send still under way (a slow chain):
    // asked again with the same session and prompt, the settler finds it once it lands, and the job is
    // served. It is waited for as long as the settler holds the payment, so a payment that is taken is
    // never answered 502 while its settlement can still land.
    for (let recheck = 0; 'unknown' in outcome; recheck++) {
      if (recheck >= rechecks.length && Date.now() >= waitUntil) break;
      await sleep(rechecks[Math.min(recheck, rechecks.length - 1)] ?? 1_000);
      outcome = await perCall.settle(settling);
    }
    if ('sessionUnusable' in outcome) return 'session_unusable';
    if ('refused' in outcome) throw new NotSubmitted(outcome.refused);
    // The job may be on chain: the keeper adopts a settlement it sees for the service's sessions.
    if ('unknown' in outcome) throw new SubmissionUnknown(outcome.unknown);
    const settled = outcome.settled;
    // The same payment sent again after its job was answered: refused as used, as it always was (it is
    // never charged twice, and its answer went out once). Only an unanswered one is served to a resend.
    if (await replyKeys?.wasAnswered(paymentReservationId))
      throw new NotSubmitted(
        new AppError('invalid_prepaid_debit_payload_nonce_used', {
          message: 'This payment was already used: sign a new one with a fresh nonce.',
        }),
      );
    await this.deps.lifecycle.publish(this.identity, JobLifecycleKind.PAYMENT_SETTLED, {
      jobId: settled.jobId,
      sessionId,
      txHash: settled.txHash,
      feeWei: settled.fee,
    });
    // A resent payment is handed the job its settlement submitted, sealed by an earlier call's prompt.
    const otherReplyKeys = ((await replyKeys?.recall(paymentReservationId)) ?? []).filter(
      (key) => !Buffer.from(key).equals(Buffer.from(replyKey)),
    );
    return { ...settled, hash: settled.txHash, ...(otherReplyKeys.length ? { otherReplyKeys } : {}) };
  }

  /** A payment not yet sent to settle is certainly not on chain: the gateway frees it. */
  mayHaveSubmitted(): boolean {
    return this.#settleAsked;
  }

  async answered(): Promise<void> {
    await this.deps.replyKeys?.markAnswered(this.terms.paymentReservationId);
  }

  /** A per-call job's `tx_hash` stays its settlement, the transaction that took the payment. */
  answerTxHash(submission: string): string {
    return submission;
  }
}
