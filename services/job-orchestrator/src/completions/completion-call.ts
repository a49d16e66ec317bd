import type { PromptMessage } from '@svc/chain';
import type { AppError } from '@svc/platform';
import type { PaymentPath } from './payment-paths/payment-path.js';

/** One completion call as the gateway hands it over, its payment path chosen where the request was read. */
export interface CompletionCall {
  readonly requestId: string;
  readonly model: string;
  readonly messages: readonly PromptMessage[];
  readonly conversationId?: string;
  readonly stream: boolean;
  readonly payment: PaymentPath;
}

/** The `service` object of an answer. */
export interface ServiceDescription {
  readonly jobId: bigint;
  readonly sessionId: bigint;
  readonly txHash: string;
  readonly worker: string;
  readonly droppedMessages: number;
}

/** The events of `RunCompletion`, in the order the proto documents. */
export type CompletionEvent =
  | { readonly case: 'started'; readonly service: ServiceDescription; readonly fee: bigint }
  | { readonly case: 'delta'; readonly text: string }
  | {
      readonly case: 'completed';
      readonly text: string;
      readonly service: ServiceDescription;
      readonly charged: bigint;
    }
  | { readonly case: 'failed'; readonly error: AppError; readonly jobSubmitted: boolean }
  | {
      readonly case: 'retrying';
      readonly jobId: bigint;
      readonly failedAttempt: number;
      readonly reasonCode: string;
    };
