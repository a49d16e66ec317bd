import type { GenService } from '@bufbuild/protobuf/codegenv2';
import { AppError, appErrorFromRpc, paymentRefusalFromProto } from '@svc/platform';
import type { ServiceClient } from '@svc/proto';
import type { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';

export type PaymentSettlerClient = ServiceClient<
  typeof PaymentSettler extends GenService<infer S> ? S : never
>;

/** A settlement that landed: the job it submitted and what it debited. */
export interface LandedSettlement {
  readonly jobId: bigint;
  readonly fee: bigint;
  readonly txHash: string;
  readonly blockNumber: number;
  readonly promptBlobHash: string;
}

/**
 * A settlement the node accepted, not mined yet: the job it submits and what its worker is handed to start
 * before inclusion (docs/protocol.md, Starting before inclusion).
 */
export interface BroadcastSettlement {
  readonly jobId: bigint;
  /** The transaction as first broadcast. */
  readonly txHash: string;
  /** The fee the settlement debits when it lands. */
  readonly fee: bigint;
  /** The signed transaction without its blob sidecar. */
  readonly signedTransaction: Uint8Array;
  readonly kzgCommitment: Uint8Array;
}

export type SettlementOutcome =
  | { readonly settled: LandedSettlement }
  /** Asked to answer at broadcast: the settlement is under way (asking again finds how it ended). */
  | { readonly broadcast: BroadcastSettlement }
  /** The payment cannot settle and nothing landed (the settler freed its nonce). */
  | { readonly refused: AppError }
  /** The session cannot take a job; the payment is still held for another session. */
  | { readonly sessionUnusable: string }
  /** The settler could not be heard: the debit may or may not have landed. */
  | { readonly unknown: AppError };

/**
 * Settles a verified per-call payment through the payment-settler: the settlement transaction debits the
 * payer and submits the job in the service's session (`submitJobWithDebit`). The settler looks a failed
 * send up on chain before it answers; only `unexpected_settle_error` (the lookup failed too, or found
 * nothing yet) and a settler that could not be heard leave the outcome unknown.
 */
export class PerCallSettlement {
  constructor(
    private readonly settler: PaymentSettlerClient,
    private readonly maxFeePerBlobGas: bigint,
  ) {}

  async settle(request: {
    readonly paymentReservationId: string;
    readonly sessionId: bigint;
    readonly promptWire: Uint8Array;
    readonly requestId: string;
    /** Answer once the node accepted the settlement, before it is mined (an older settler answers once mined). */
    readonly answerAtBroadcast?: boolean;
  }): Promise<SettlementOutcome> {
    let response;
    try {
      response = await this.settler.settlePayment(
        {
          reservationId: request.paymentReservationId,
          sessionId: request.sessionId.toString(),
          promptWire: request.promptWire,
          maxFeePerBlobGasWei: { decimal: this.maxFeePerBlobGas.toString() },
          requestId: request.requestId,
          answerAtBroadcast: request.answerAtBroadcast ?? false,
        },
        { requestId: request.requestId },
      );
    } catch (error) {
      const answer = appErrorFromRpc(error);
      // The settler refused before sending (blob fee, pause, model): nothing landed. An
      // `unexpected_settle_error` comes after a lookup that may itself have failed, and a settler that was
      // not heard may have sent: the debit may be on chain (the keeper adopts it if so).
      if (answer.code !== 'internal' && answer.code !== 'unexpected_settle_error') return { refused: answer };
      return {
        unknown:
          answer.code === 'unexpected_settle_error'
            ? answer
            : new AppError('unexpected_settle_error', {
                message:
                  'The payment-settler could not be reached; send the same PAYMENT-SIGNATURE again (a payment that did settle is refused as used, never charged twice).',
                cause: error,
              }),
      };
    }
    const { outcome } = response;
    switch (outcome.case) {
      case 'settled': {
        const settled = outcome.value;
        return {
          settled: {
            jobId: BigInt(settled.jobId),
            fee: BigInt(settled.amountWei?.decimal ?? '0'),
            txHash: settled.txHash?.hex ?? '',
            blockNumber: Number(settled.blockNumber),
            promptBlobHash: settled.promptBlobHash?.hex ?? '',
          },
        };
      }
      case 'broadcast': {
        const broadcast = outcome.value;
        return {
          broadcast: {
            jobId: BigInt(broadcast.jobId),
            txHash: broadcast.txHash?.hex ?? '',
            fee: BigInt(broadcast.amountWei?.decimal ?? '0'),
            signedTransaction: broadcast.signedTransaction,
            kzgCommitment: broadcast.kzgCommitment,
          },
        };
      }
      case 'refused': {
        const code = paymentRefusalFromProto(outcome.value.code) ?? 'invalid_transaction_state';
        return {
          refused: new AppError(code, {
            message: outcome.value.message || undefined,
          }),
        };
      }
      case 'sessionUnusable':
        return { sessionUnusable: outcome.value.reason };
      default:
        return {
          unknown: new AppError('unexpected_settle_error', { message: 'The settler gave no outcome.' }),
        };
    }
  }
}
