import { setTimeout as sleep } from 'node:timers/promises';
import { AppError } from '@svc/platform';
import type { PrepaidDebitPayment } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import {
  JobLifecycleKind,
  type CallIdentity,
  type LifecyclePublisher,
} from '../../events/lifecycle-events.js';
import type { PerCallSettlement } from '../per-call-settlement.js';
import { NotSubmitted, SubmissionUnknown, type PaymentPath, type Submission } from './payment-path.js';
import { invalidRequest, isAddress, isWei } from './request-fields.js';

/** Waits before asking the settler again about a settlement whose outcome it could not tell. */
const SETTLEMENT_RECHECKS_MS = [500, 1_000, 2_000];

export interface PerCallPathDependencies {
  /** Settles per-call payments; undefined when this server takes none. */
  readonly perCall: PerCallSettlement | undefined;
  readonly lifecycle: Pick<LifecyclePublisher, 'publish'>;
  /** The service's principal: the owner of the sessions per-call jobs run in (the payments' `payTo`). */
  readonly principal: string;
  /** Waits before asking the settler again about a settlement whose outcome it could not tell. */
  readonly settlementRechecksMs?: readonly number[];
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

  async submit(sessionId: bigint, promptWire: Uint8Array): Promise<Submission> {
    const perCall = this.deps.perCall!;
    this.#settleAsked = true;
    const settling = {
      paymentReservationId: this.terms.paymentReservationId,
      sessionId,
      promptWire,
      requestId: this.call.requestId,
    };
    let outcome = await perCall.settle(settling);
    // An unknown outcome may be a settlement that landed unheard: asked again with the same session and
    // prompt, the settler finds it (or a send still under way ends), and the job is served after all.
    for (const waitMs of this.deps.settlementRechecksMs ?? SETTLEMENT_RECHECKS_MS) {
      if (!('unknown' in outcome)) break;
      await sleep(waitMs);
      outcome = await perCall.settle(settling);
    }
    if ('sessionUnusable' in outcome) return 'session_unusable';
    if ('refused' in outcome) throw new NotSubmitted(outcome.refused);
    // The job may be on chain: the keeper adopts a settlement it sees for the service's sessions.
    if ('unknown' in outcome) throw new SubmissionUnknown(outcome.unknown);
    const settled = outcome.settled;
    await this.deps.lifecycle.publish(this.identity, JobLifecycleKind.PAYMENT_SETTLED, {
      jobId: settled.jobId,
      sessionId,
      txHash: settled.txHash,
      feeWei: settled.fee,
    });
    return { ...settled, hash: settled.txHash };
  }

  /** A payment not yet sent to settle is certainly not on chain: the gateway frees it. */
  mayHaveSubmitted(): boolean {
    return this.#settleAsked;
  }

  /** A per-call job's `tx_hash` stays its settlement, the transaction that took the payment. */
  answerTxHash(submission: string): string {
    return submission;
  }
}
