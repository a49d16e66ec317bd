import { setTimeout as sleep } from 'node:timers/promises';
import { encodeBlob } from '@svc/chain';
import { AppError } from '@svc/platform';
import type { PrepaidDebitPayment } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import {
  JobLifecycleKind,
  type CallIdentity,
  type LifecyclePublisher,
} from '../../events/lifecycle-events.js';
import type { LandedSettlement, PerCallSettlement, SettlementOutcome } from '../per-call-settlement.js';
import type { ReplyKeyEscrow } from '../reply-key-escrow.js';
import {
  announcedOnceMined,
  NotSubmitted,
  SubmissionReverted,
  SubmissionUnknown,
  type PaymentPath,
  type Submission,
  type SubmittedJob,
} from './payment-path.js';
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

/** What the settler is asked to settle: the same reservation, session and prompt every time. */
type SettleRequest = Parameters<PerCallSettlement['settle']>[0];

/**
 * A call paid per call: the payment-settler verified the payment and holds its nonce; the settlement
 * debits the payer and submits the job in a session the service owns (`submitJobWithDebit`), so nothing
 * can be on chain before the settler was asked. The settler answers once the settlement is broadcast, so
 * the worker starts before it is mined (docs/protocol.md, Starting before inclusion), and is asked again
 * until it landed.
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
    const { paymentReservationId } = this.terms;
    // Before anything can land: a resend of this payment may have to read the job this prompt starts.
    await this.deps.replyKeys?.remember(paymentReservationId, this.call.requestId, replyKey);
    this.#settleAsked = true;
    const settling: SettleRequest = {
      paymentReservationId,
      sessionId,
      promptWire,
      requestId: this.call.requestId,
    };
    const outcome = await this.#outcomeOnceKnown({ ...settling, answerAtBroadcast: true });
    if ('sessionUnusable' in outcome) return 'session_unusable';
    if (!('broadcast' in outcome)) {
      // Mined already: a resent payment whose settlement landed, or an older settler that answers once mined.
      const settled = landedOf(outcome);
      // The same payment sent again after its job was answered: refused as used, as it always was (it is
      // never charged twice, and its answer went out once). Only an unanswered one is served to a resend.
      if (await this.deps.replyKeys?.wasAnswered(this.terms.paymentReservationId))
        throw new NotSubmitted(
          new AppError('invalid_prepaid_debit_payload_nonce_used', {
            message: 'This payment was already used: sign a new one with a fresh nonce.',
          }),
        );
      return announcedOnceMined(
        await this.#landedJob(settled, sessionId, await this.#otherReplyKeys(replyKey)),
      );
    }
    const { broadcast } = outcome;
    const otherReplyKeys = await this.#otherReplyKeys(replyKey);
    const landed = this.#landed(settling, otherReplyKeys).then((job) => {
      // A resend whose earlier settlement was still on its way may land that one instead: its job is not
      // the one handed over (a call serving the earlier job, or the keeper, settles it).
      if (job.jobId !== broadcast.jobId)
        throw new SubmissionUnknown(
          new AppError('unexpected_settle_error', {
            message: "The payment settled another call's job; send the same PAYMENT-SIGNATURE again.",
          }),
        );
      return job;
    });
    // A run that ends before it waits for the landing leaves nobody to hear how it ended: no crash for that.
    landed.catch(() => undefined);
    return {
      jobId: broadcast.jobId,
      hash: broadcast.txHash,
      fee: broadcast.fee,
      handover: {
        signedTransaction: broadcast.signedTransaction,
        // The settler framed the same prompt into the blob it committed to: the commitment is not redone.
        blob: encodeBlob(promptWire),
        kzgCommitment: broadcast.kzgCommitment,
      },
      landed,
      ...(otherReplyKeys.length ? { otherReplyKeys } : {}),
    };
  }

  /**
   * The broadcast settlement once mined. Asked again without the flag: while the send is under way the
   * settler says so (and is asked again later), and a send that failed unheard is sent once more with the
   * same blob and job id, the ones the worker was handed.
   */
  async #landed(settling: SettleRequest, otherReplyKeys: readonly Uint8Array[]): Promise<SubmittedJob> {
    const outcome = await this.#outcomeOnceKnown(settling);
    if ('sessionUnusable' in outcome)
      // Sent again, the settlement found its session no longer taking jobs: the one broadcast did not land
      // in it either (it reverted, or was dropped and would now revert).
      throw new SubmissionReverted(
        new AppError('job_failed', {
          message:
            "The payment's settlement did not land: its session stopped taking jobs first. Send the request again.",
        }),
      );
    if ('broadcast' in outcome)
      throw new SubmissionUnknown(
        new AppError('unexpected_settle_error', {
          message: 'The payment-settler answered a broadcast it was not asked for.',
        }),
      );
    return this.#landedJob(landedOf(outcome), settling.sessionId, otherReplyKeys);
  }

  /**
   * Asks the settler until the outcome is known. An unknown outcome may be a settlement that landed
   * unheard or a send still under way (a slow chain, or one answered at broadcast): asked again with the
   * same session and prompt, the settler finds it once it lands. It is waited for as long as the settler
   * holds the payment, so a payment that is taken is never answered 502 while its settlement can still land.
   */
  async #outcomeOnceKnown(settling: SettleRequest): Promise<SettlementOutcome> {
    const perCall = this.deps.perCall!;
    const rechecks = this.deps.settlementRechecksMs ?? SETTLEMENT_RECHECKS_MS;
    const waitUntil = Date.now() + (this.deps.settlementOutcomeWaitMs ?? SETTLEMENT_OUTCOME_WAIT_MS);
    let outcome = await perCall.settle(settling);
    for (let recheck = 0; 'unknown' in outcome; recheck++) {
      if (recheck >= rechecks.length && Date.now() >= waitUntil) break;
      await sleep(rechecks[Math.min(recheck, rechecks.length - 1)] ?? 1_000);
      outcome = await perCall.settle(settling);
    }
    return outcome;
  }

  /** A resent payment is handed the job its settlement submitted, sealed by an earlier call's prompt. */
  async #otherReplyKeys(replyKey: Uint8Array): Promise<readonly Uint8Array[]> {
    const keys = (await this.deps.replyKeys?.recall(this.terms.paymentReservationId)) ?? [];
    return keys.filter((key) => !Buffer.from(key).equals(Buffer.from(replyKey)));
  }

  /**
   * The job of a settlement known to have landed, told to the lifecycle once. (A broadcast this call made
   * may be answered before it lands, marking the payment answered: only a resend is refused as used.)
   */
  async #landedJob(
    settled: LandedSettlement,
    sessionId: bigint,
    otherReplyKeys: readonly Uint8Array[],
  ): Promise<SubmittedJob> {
    await this.deps.lifecycle.publish(this.identity, JobLifecycleKind.PAYMENT_SETTLED, {
      jobId: settled.jobId,
      sessionId,
      txHash: settled.txHash,
      feeWei: settled.fee,
    });
    return {
      jobId: settled.jobId,
      fee: settled.fee,
      hash: settled.txHash,
      blockNumber: settled.blockNumber,
      promptBlobHash: settled.promptBlobHash,
      ...(otherReplyKeys.length ? { otherReplyKeys } : {}),
    };
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

/** The settlement of an outcome known not to be a session's or a broadcast's; a refusal or an unknown one ends the run. */
function landedOf(
  outcome: Extract<SettlementOutcome, { settled: unknown } | { refused: unknown } | { unknown: unknown }>,
): LandedSettlement {
  if ('refused' in outcome) throw new NotSubmitted(outcome.refused);
  // The job may be on chain: the keeper adopts a settlement it sees for the service's sessions.
  if ('unknown' in outcome) throw new SubmissionUnknown(outcome.unknown);
  return outcome.settled;
}
