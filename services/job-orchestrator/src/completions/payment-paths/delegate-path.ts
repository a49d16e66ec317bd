import { TransactionRevertedError } from '@svc/chain';
import { AppError } from '@svc/platform';
import { getBytes } from 'ethers';
import type { DelegatePayment } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import {
  revertOf,
  promptBlobHashOf,
  delegatePathErrorOf,
  SubmissionOutcomeUnknownError,
  type BeforeSigning,
  type ServiceChain,
} from '../../chain/service-chain.js';
import type { PendingSubmissions } from '../../keeper/pending-submissions.js';
import type { CallIdentity } from '../../events/lifecycle-events.js';
import type { ConfiguredModel } from '../model-catalogue.js';
import { delegatePaymentRefusal, delegateRefusalOf, type DelegatePosition } from './delegate-refusal.js';
import {
  NotSubmitted,
  SubmissionReverted,
  SubmissionUnknown,
  type PaymentPath,
  type Submission,
} from './payment-path.js';
import { invalidRequest, isAddress, isWei } from './request-fields.js';
import type { HeldFee, UnconfirmedFees } from './unconfirmed-fees.js';

/** Reverts that say a pooled session cannot take a job: another session is tried. */
const STALE_SESSION_REVERTS = new Set([
  'SessionStateInvalid',
  'WorkerNotActive',
  'NotSessionWorker',
  // Another submission took the session's next job id first (docs/protocol.md, Job ids).
  'UnexpectedJobId',
]);

export interface DelegatePathDependencies {
  readonly chain: Pick<ServiceChain, 'reads' | 'principal' | 'jobRegistry' | 'submitJobFor'>;
  readonly chainId: bigint;
  /** Where a submission with no known outcome is left for the keeper to adopt if it lands. */
  readonly pending?: Pick<PendingSubmissions, 'expect'>;
  /** The wallets' fees of submissions not yet mined, counted against their balance and allowance. */
  readonly unconfirmed: Pick<UnconfirmedFees, 'hold'>;
}

/** The request's delegate payment, as the gateway reserved it against the key's spend cap. */
export interface DelegatePaymentTerms {
  readonly wallet: string;
  readonly keyId: string;
  /** The key's spend reservation for the call. */
  readonly reservationId: string;
  readonly maxFeeWei: bigint;
}

/**
 * An API-key call paid from the key's wallet by the service's delegate (`submitJobFor`): the wallet
 * authorized the service's signer, and its prepaid balance and the signer's allowance cover the fee. The
 * job runs in the wallet's own sessions.
 */
export class DelegatePath implements PaymentPath {
  readonly identity: CallIdentity;
  /** The model's fee the call was checked against: what the job is charged once it lands. */
  #fee: bigint | undefined;
  /** The wallet's position on chain when the call was checked. */
  #position: DelegatePosition | undefined;

  constructor(
    private readonly deps: DelegatePathDependencies,
    private readonly terms: DelegatePaymentTerms,
    call: { readonly requestId: string; readonly model: string },
  ) {
    this.identity = {
      reservationId: terms.reservationId,
      requestId: call.requestId,
      paymentPath: 'delegate',
      payer: terms.wallet,
      keyId: terms.keyId,
      model: call.model,
    };
  }

  /** The request's terms, checked again (internal calls do not take the caller's word), or why not. */
  static termsOf(payment: DelegatePayment): DelegatePaymentTerms | AppError {
    const { wallet, maxFeeWei, reservationId, keyId } = payment;
    if (!isAddress(wallet?.hex)) return invalidRequest('payment.wallet is not an address');
    if (!isWei(maxFeeWei?.decimal)) return invalidRequest('payment.max_fee_wei is not a decimal amount');
    if (!reservationId) return invalidRequest('payment.reservation_id is empty');
    return { wallet: wallet.hex, keyId, reservationId, maxFeeWei: BigInt(maxFeeWei.decimal) };
  }

  /**
   * The service's own sessions, shared by every wallet's calls (a delegate may submit for a payer into its
   * own sessions): a new wallet's first call finds one open and claimed, and a payer cannot front-run a
   * submission handed to the worker before inclusion, since only the owner submits into them
   * (docs/protocol.md, Starting before inclusion; docs/architecture.md, Sessions ready before they are needed).
   */
  get sessionOwner(): string {
    return this.deps.chain.principal;
  }

  async checkPayable(model: ConfiguredModel): Promise<void> {
    const { chain } = this.deps;
    const { wallet, maxFeeWei } = this.terms;
    const position = await chain.reads.delegatePosition(wallet, chain.principal);
    this.#refuseUnlessPayable(position, model.fee);
    if (maxFeeWei < model.fee)
      throw new AppError('job_failed', {
        message: `The fee of ${model.name} rose to ${model.fee} wei while the call was prepared; send it again.`,
      });
    this.#fee = model.fee;
    this.#position = position;
  }

  #refuseUnlessPayable(position: DelegatePosition, fee: bigint): void {
    const { chain, chainId } = this.deps;
    const refusal = delegateRefusalOf(position, fee);
    if (!refusal) return;
    const context = {
      chainId,
      jobRegistry: chain.jobRegistry,
      delegate: chain.principal,
      chain: chain.reads,
    };
    throw delegatePaymentRefusal(refusal, context, this.terms.wallet, position, fee);
  }

  /**
   * Holds the fee against the wallet's submissions not yet mined, refusing the call when the balance or
   * allowance read on chain does not also cover those (they show on chain only once mined).
   */
  async #holdFee(fee: bigint): Promise<HeldFee> {
    const held = await this.deps.unconfirmed.hold(this.terms.wallet, fee);
    const others = held.total - fee;
    const position = this.#position!;
    try {
      this.#refuseUnlessPayable(
        { ...position, balance: position.balance - others, allowance: position.allowance - others },
        fee,
      );
    } catch (error) {
      await held.release();
      throw error instanceof AppError ? new NotSubmitted(error) : error;
    }
    return held;
  }

  async submit(
    sessionId: bigint,
    promptWire: Uint8Array,
    _replyKey: Uint8Array,
    beforeSigning?: BeforeSigning,
  ): Promise<Submission> {
    const { wallet, maxFeeWei } = this.terms;
    const held = await this.#holdFee(this.#fee ?? maxFeeWei);
    let signed;
    try {
      signed = await this.deps.chain.submitJobFor(wallet, sessionId, maxFeeWei, promptWire, beforeSigning);
    } catch (error) {
      await held.release();
      if (STALE_SESSION_REVERTS.has(revertOf(error)?.name ?? '')) return 'session_unusable';
      throw await this.#submissionError(error);
    }
    // Mined or not landing, the chain's balance and allowance tell from then on.
    void signed.landed.then(held.release, held.release).catch(() => undefined);
    const { jobId, hash, signedTransaction, blob } = signed;
    const landed = signed.landed.then(
      ({ jobId: landedId, fee, tx }) => ({
        jobId: landedId,
        fee,
        hash: tx.hash,
        blockNumber: tx.blockNumber,
        promptBlobHash: promptBlobHashOf(tx),
      }),
      async (error: unknown) => {
        throw await this.#submissionError(error);
      },
    );
    return {
      jobId,
      hash,
      fee: this.#fee ?? maxFeeWei,
      landed,
      ...(signedTransaction
        ? {
            handover: {
              signedTransaction: getBytes(signedTransaction),
              blob: blob.data,
              kzgCommitment: blob.commitment,
            },
          }
        : {}),
    };
  }

  /** What a failed submission means for the call: nothing landed, a revert, or an outcome not known. */
  async #submissionError(error: unknown): Promise<unknown> {
    // Refused before signing by the call itself (it could not record the job): nothing was sent.
    if (error instanceof NotSubmitted) return error;
    if (error instanceof TransactionRevertedError) {
      // Simulated fine, mined and reverted: the session changed in between (its worker closed it or left).
      // No job landed, and the payer is charged nothing; it could not have caused it (it is no party to the
      // service's sessions, and its spending cuts wait), so the session's worker is what is counted.
      return new SubmissionReverted(
        new AppError('job_failed', {
          message:
            "The job's submission reverted on chain (its session changed under it); send the request again.",
          cause: error,
        }),
      );
    }
    if (error instanceof SubmissionOutcomeUnknownError) {
      // Broadcast, perhaps, and not found: it may still land. The keeper adopts the job if it does, under
      // this call's reservation, so it is settled (refunded, or counted as spent) like any other.
      await this.deps.pending?.expect(error, this.identity);
      return new SubmissionUnknown(
        new AppError('job_failed', {
          message:
            "The job's submission has no known outcome; if it lands it is settled on its own. Send the request again.",
          cause: error,
        }),
      );
    }
    const known = delegatePathErrorOf(error);
    if (known) return new NotSubmitted(known);
    // A simulation refused it: nothing was signed.
    if (revertOf(error)) return new NotSubmitted(new AppError('job_failed', { cause: error }));
    return error;
  }

  mayHaveSubmitted(): boolean {
    return true;
  }

  answerTxHash(_submission: string, reassignment: string): string {
    return reassignment;
  }
}
