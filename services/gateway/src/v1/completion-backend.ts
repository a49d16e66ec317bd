import type { ChatMessage } from '@svc/api';
import type { AppError } from '@svc/platform';

/** A message as a job carries it (text parts joined), as `@svc/api` reads it from the request body. */
export type { ChatMessage, ChatRole } from '@svc/api';

// The port `/v1` runs completions through. The job-orchestrator (over gRPC) is its real implementation;
// a gateway configured with none answers completions 503 `not_configured` and lists no models.

/** A model a completion can name, as `GET /v1/models` lists it. */
export interface ModelListing {
  /** The exact model name (colons included), sent verbatim as `model`. */
  readonly id: string;
  /** OpenAI's `created`, in Unix seconds; 0 when unknown. */
  readonly created?: number;
  /** OpenAI's `owned_by`. */
  readonly ownedBy?: string;
}

/**
 * The `service` object of docs/api.md (the proto's `ServiceInfo`): the on-chain job that answered and where
 * it ran. `openai-shapes.ts` writes it in the wire's spelling.
 */
export interface ServiceInfo {
  readonly jobId: string;
  readonly sessionId: string;
  readonly txHash: string;
  readonly worker: string;
  /** Present only when the oldest messages were left out to fit one blob. */
  readonly droppedMessages?: number;
}

// The payment and the events are named as the job-orchestrator's proto names them: `case` and its values
// are RunCompletionRequest's `payment` and RunCompletionResponse's `event` oneofs, the fields theirs.

/** An API-key call, paid by the key's wallet through the service's delegate. */
export interface DelegatePayment {
  readonly case: 'delegate';
  readonly wallet: string;
  readonly keyId: string;
  /** The key-service spend reservation held for this call. */
  readonly reservationId: string;
  /** The reserved amount: the most the job may cost. */
  readonly maxFeeWei: bigint;
}

/**
 * A call paid per call with a verified x402 `prepaid-debit` payment: the settlement debits the payer and
 * submits the job in one transaction. With an API key sent beside the payment, the key's cap holds it too.
 */
export interface PrepaidDebitPayment {
  readonly case: 'prepaidDebit';
  /** The payment-settler's reservation of the payment's nonce. */
  readonly paymentReservationId: string;
  /** The wallet the payment debits. */
  readonly payer: string;
  /** The fee the payment debits. */
  readonly amountWei: bigint;
  /** The API key sent beside the payment, if any. */
  readonly keyId?: string;
  /** That key's spend reservation for this call. */
  readonly spendReservationId?: string;
}

export type CompletionPayment = DelegatePayment | PrepaidDebitPayment;

export interface CompletionRequest {
  /** The gateway's own id of the call (never the caller's `x-request-id`). */
  readonly callId: string;
  readonly model: string;
  /** The whole conversation; the last message is the user's. */
  readonly messages: readonly ChatMessage[];
  readonly conversationId?: string;
  readonly stream: boolean;
  readonly payment: CompletionPayment;
}

/**
 * What a running completion reports, in order: `started`, then `delta`s (streamed calls), then
 * `completed` or `failed`; or `failed` alone. Nothing reached the client before `started`.
 *
 * `failed.jobSubmitted` decides the call's reservations (the key's spend, a per-call payment's nonce):
 * `false` is the backend's authoritative word that no job transaction was (or will be) sent, and only then
 * does the gateway give them back. Every other ending (a failure after submission, a thrown error, events
 * that stop, the client leaving) leaves them to the job's lifecycle events (and the settler), and to their
 * TTLs as a last resort.
 */
export type CompletionEvent =
  | { readonly case: 'started'; readonly service: ServiceInfo; readonly feeWei: bigint }
  | { readonly case: 'delta'; readonly text: string }
  | {
      readonly case: 'completed';
      readonly text: string;
      readonly service: ServiceInfo;
      /** The fee actually charged; the spend reservation is committed at this amount. */
      readonly chargedWei: bigint;
    }
  | {
      readonly case: 'failed';
      readonly error: AppError;
      /** Whether a job transaction may have been sent; false only when the backend knows none was. */
      readonly jobSubmitted: boolean;
    };

/** The chain completions are paid on: what a wallet needs to read its own balance and authorization. */
export interface PaymentChain {
  /** The EIP-155 chain id. */
  readonly chainId: number;
  /** JobRegistry, EIP-55 checksummed. */
  readonly jobRegistry: string;
  /** The delegate wallets authorize (the service's signer), EIP-55 checksummed; undefined without one. */
  readonly delegate: string | undefined;
}

export interface CompletionBackend {
  /** The models served by at least one worker right now. */
  listModels(): Promise<readonly ModelListing[]>;
  /** The chain, JobRegistry and delegate the backend's completions are paid through. */
  describeChain(): Promise<PaymentChain>;
  /** The current job fee of a model, reserved against the key's cap; `model_not_found` for an unknown one. */
  quoteFee(model: string): Promise<bigint>;
  /**
   * Runs one completion as a job. A failure may also be thrown (an AppError or a gRPC error carrying one),
   * but that says nothing about submission: report a refusal before submission as `failed` with
   * `jobSubmitted: false`, or its reservation stays held. `signal` aborts when the client goes away; the
   * backend decides whether the job still goes ahead, and its lifecycle events settle the reservation.
   */
  runCompletion(request: CompletionRequest, signal: AbortSignal): AsyncIterable<CompletionEvent>;
}
