import type { MessageInitShape } from '@bufbuild/protobuf';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import { getBytes } from 'ethers';
import { AppError, paymentRefusalToProto, prepaidDebitRequirementsToProto } from '@svc/platform';
import type { ServiceImpl } from '@svc/proto';
import {
  PaymentReservationState,
  type PaymentRefusalSchema,
  type PaymentSettler,
} from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { readPaymentSignature, type PrepaidDebitRequirements } from '@svc/x402';
import type { PaymentSettlement, SettlementBroadcast } from './payments/payment-settlement.js';
import type { PaymentTerms } from './payments/payment-terms.js';
import type { PaymentVerifier } from './payments/payment-verifier.js';
import type { NonceReservations, ReleaseOutcome, Settlement } from './payments/nonce-reservations.js';
import type { PaymentRefusal } from './payments/refusals.js';

type Methods = typeof PaymentSettler extends GenService<infer S> ? S : never;

/** What the settler runs on when this server takes per-call payments. */
export interface PaymentSettlerParts {
  readonly terms: PaymentTerms;
  readonly verifier: PaymentVerifier;
  readonly settlement: PaymentSettlement;
  readonly reservations: NonceReservations;
  /** Used when a VerifyPayment names no reservation time. */
  readonly defaultReservationTtlMs: number;
}

/** The last second a protobuf Timestamp can hold (9999-12-31): a later deadline ("never") is shown as it. */
const MAX_TIMESTAMP_SECONDS = 253_402_300_799n;

const RESOURCE_DESCRIPTION = 'One chat completion, run as a JobRegistry job and answered by a worker.';

/**
 * The PaymentSettler gRPC service. Without parts (no facilitator configured) it takes no per-call
 * payments: a payload that does not decode is still `invalid_payload` and a foreign version
 * `invalid_x402_version`, then everything is `unsupported_scheme`.
 */
export function paymentSettlerHandlers(parts: PaymentSettlerParts | undefined): ServiceImpl<Methods> {
  return {
    async getRequirements(request) {
      const { terms } = requireParts(parts);
      return {
        x402Version: 2,
        resource: {
          url: request.resourceUrl,
          description: RESOURCE_DESCRIPTION,
          mimeType: 'application/json',
        },
        requirements: prepaidDebitRequirementsToProto(
          await terms.requirementsFor(request.model).catch(unreadable),
        ),
      };
    },

    async verifyPayment(request) {
      if (!parts) {
        const read = readPaymentSignature(request.paymentSignature);
        if (read.ok || read.code === 'unsupported_scheme') throw notTaken();
        return {
          outcome: { case: 'refused', value: refusalMessage({ code: read.code, message: read.message }) },
        };
      }
      // A missing or non-positive time is the default one.
      const askedMs = request.reservationTtl
        ? Number(request.reservationTtl.seconds) * 1000 + Math.ceil(request.reservationTtl.nanos / 1e6)
        : 0;
      const ttlMs = askedMs > 0 ? askedMs : parts.defaultReservationTtlMs;
      const verdict = await parts.verifier.verify(request.paymentSignature, request.model, ttlMs);
      if ('refused' in verdict) {
        const current =
          verdict.current ?? (await parts.terms.requirementsFor(request.model).catch(() => undefined));
        return { outcome: { case: 'refused', value: refusalMessage(verdict.refused, current) } };
      }
      const held = verdict.verified;
      const { payer, nonce } = held.authorization;
      return {
        outcome: {
          case: 'verified',
          value: {
            reservationId: held.reservationId,
            payer: { hex: payer },
            nonce: { hex: nonce },
            amountWei: { decimal: held.amount },
            maxAmountWei: { decimal: verdict.maxAmount.toString() },
            deadline: {
              seconds: verdict.deadline < MAX_TIMESTAMP_SECONDS ? verdict.deadline : MAX_TIMESTAMP_SECONDS,
            },
            reservationExpiresAt: timestampFromMs(held.expiresAtMs),
            network: held.network,
          },
        },
      };
    },

    async settlePayment(request) {
      const { settlement } = requireParts(parts);
      if (!/^[0-9]{1,78}$/.test(request.sessionId))
        throw new AppError('invalid_request', { message: 'session_id is not a decimal uint256' });
      const outcome = await settlement.settle({
        reservationId: request.reservationId,
        sessionId: BigInt(request.sessionId),
        promptWire: request.promptWire,
        ...(request.maxFeePerBlobGasWei
          ? { maxFeePerBlobGas: BigInt(request.maxFeePerBlobGasWei.decimal) }
          : {}),
        requestId: request.requestId,
        answerAtBroadcast: request.answerAtBroadcast,
      });
      if ('settled' in outcome)
        return { outcome: { case: 'settled', value: settlementMessage(outcome.settled) } };
      if ('broadcast' in outcome)
        return { outcome: { case: 'broadcast', value: broadcastMessage(outcome.broadcast) } };
      if ('refused' in outcome)
        return { outcome: { case: 'refused', value: refusalMessage(outcome.refused) } };
      return { outcome: { case: 'sessionUnusable', value: { reason: outcome.sessionUnusable } } };
    },

    async releasePayment(request) {
      const { reservations } = requireParts(parts);
      const outcome = await reservations.release(request.reservationId);
      return { state: RESERVATION_STATES[outcome] };
    },
  };
}

const RESERVATION_STATES: Record<ReleaseOutcome, PaymentReservationState> = {
  released: PaymentReservationState.RELEASED,
  settled: PaymentReservationState.SETTLED,
  held: PaymentReservationState.HELD,
};

/** A chain that could not be read while stating or checking a payment: 502 `unexpected_verify_error`. */
function unreadable(error: unknown): never {
  if (error instanceof AppError) throw error;
  throw new AppError('unexpected_verify_error', {
    message: 'The payment requirements could not be read from the chain; try again.',
    cause: error,
  });
}

function requireParts(parts: PaymentSettlerParts | undefined): PaymentSettlerParts {
  if (!parts) throw notTaken();
  return parts;
}

function notTaken(): AppError {
  return new AppError('unsupported_scheme', {
    message: 'This server takes no per-call payments: send the call with an API key.',
  });
}

function refusalMessage(
  refusal: PaymentRefusal,
  current?: PrepaidDebitRequirements,
): MessageInitShape<typeof PaymentRefusalSchema> {
  return {
    code: paymentRefusalToProto(refusal.code),
    message: refusal.message,
    ...(refusal.payer ? { payer: { hex: refusal.payer } } : {}),
    ...(current ? { currentRequirements: prepaidDebitRequirementsToProto(current) } : {}),
  };
}

function settlementMessage(settlement: Settlement) {
  return {
    txHash: { hex: settlement.txHash },
    jobId: settlement.jobId,
    payer: { hex: settlement.payer },
    amountWei: { decimal: settlement.amount },
    network: settlement.network,
    promptBlobHash: { hex: settlement.promptBlobHash },
    blockNumber: BigInt(settlement.blockNumber),
  };
}

function broadcastMessage(broadcast: SettlementBroadcast) {
  return {
    jobId: broadcast.jobId,
    txHash: { hex: broadcast.txHash },
    signedTransaction: getBytes(broadcast.signedTransaction),
    kzgCommitment: broadcast.kzgCommitment,
    amountWei: { decimal: broadcast.amount },
  };
}
