import type { MessageInitShape } from '@bufbuild/protobuf';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import { getAddress } from 'ethers';
import { AppError, isAppError, type AppError as AppErrorType } from '@svc/platform';
import type { CallContext, ServiceImpl } from '@svc/proto';
import { ChatRole } from '@svc/proto/gen/svc/common/v1/chat_pb';
import type { ApiErrorDetailsSchema } from '@svc/proto/gen/svc/common/v1/error_pb';
import type { PaymentOption } from '@svc/proto/gen/svc/common/v1/payment_option_pb';
import type { ServiceInfoSchema } from '@svc/proto/gen/svc/common/v1/service_info_pb';
import type {
  JobOrchestrator,
  RunCompletionRequest,
  RunCompletionResponseSchema,
} from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import type { PromptRole } from '@svc/chain';
import type { CompletionEvent, ServiceDescription } from './completion-call.js';
import type { CompletionRunner } from './completion-runner.js';
import { invalidRequest } from './payment-paths/request-fields.js';
import type { ModelCatalogue } from './model-catalogue.js';

type Methods = typeof JobOrchestrator extends GenService<infer S> ? S : never;
type RunCompletionEvent = MessageInitShape<typeof RunCompletionResponseSchema>;

const ROLES: Partial<Record<ChatRole, PromptRole>> = {
  [ChatRole.SYSTEM]: 'system',
  [ChatRole.DEVELOPER]: 'developer',
  [ChatRole.USER]: 'user',
  [ChatRole.ASSISTANT]: 'assistant',
};

/** The chain completions are paid on, as `DescribeChain` names it. */
export interface PaymentChain {
  readonly chainId: bigint;
  readonly jobRegistry: string;
  /** The service's principal, which wallets authorize as their delegate; undefined without a signer. */
  readonly delegate: string | undefined;
}

/** The JobOrchestrator gRPC service over the catalogue, the completion runner and the chain they use. */
export function jobOrchestratorHandlers(
  catalogue: ModelCatalogue,
  runner: CompletionRunner | undefined,
  chain: PaymentChain,
): ServiceImpl<Methods> {
  // Checksummed once: a wallet's UI shows these addresses, and EIP-55 lets it catch a mangled one.
  const described = {
    chainId: chain.chainId,
    jobRegistry: { hex: getAddress(chain.jobRegistry) },
    ...(chain.delegate !== undefined ? { delegate: { hex: getAddress(chain.delegate) } } : {}),
  };
  return {
    async listModels() {
      const models = await catalogue.runnable();
      return { models: models.map((model) => ({ id: model.name })) };
    },
    async quoteFee(request) {
      const model = await catalogue.model(request.model);
      return { feeWei: { decimal: model.fee.toString() } };
    },
    async describeChain() {
      return described;
    },
    runCompletion: (request, context) => runCompletion(runner, request, context),
  };
}

async function* runCompletion(
  runner: CompletionRunner | undefined,
  request: RunCompletionRequest,
  context: CallContext,
): AsyncIterable<RunCompletionEvent> {
  if (!runner) {
    yield failedEvent(
      new AppError('not_configured', {
        message: 'This server has no service signer: it runs no completions.',
      }),
      false,
    );
    return;
  }
  const requestId = request.requestId || context.requestId;
  // The payment path is chosen here, once; the run never asks again which one it is on.
  const payment = runner.payments.forRequest(request, requestId);
  if (isAppError(payment)) {
    yield failedEvent(payment, false);
    return;
  }
  const refusal = checkRequest(request);
  if (refusal) {
    yield failedEvent(refusal, false);
    return;
  }
  const events = runner.run(
    {
      requestId,
      model: request.model,
      messages: request.messages.map((message) => ({ role: ROLES[message.role]!, content: message.content })),
      ...(request.conversationId ? { conversationId: request.conversationId } : {}),
      stream: request.stream,
      payment,
    },
    context.signal,
  );
  for await (const event of events) yield toResponse(event);
}

/** What the gateway guarantees of the rest of the request, checked again: internal calls do not take the caller's word. */
function checkRequest(request: RunCompletionRequest): AppErrorType | undefined {
  if (request.conversationId.length > 64)
    return invalidRequest('conversation_id is longer than 64 characters');
  if (request.messages.length === 0) return invalidRequest('messages is empty');
  if (request.messages.some((message) => ROLES[message.role] === undefined))
    return invalidRequest('a message has no role');
  if (request.messages.at(-1)!.role !== ChatRole.USER)
    return invalidRequest("the last message must be the user's");
  return undefined;
}

function toResponse(event: CompletionEvent): RunCompletionEvent {
  switch (event.case) {
    case 'started':
      return {
        event: {
          case: 'started',
          value: { service: serviceInfo(event.service), feeWei: { decimal: event.fee.toString() } },
        },
      };
    case 'delta':
      return { event: { case: 'delta', value: { text: event.text } } };
    case 'completed':
      return {
        event: {
          case: 'completed',
          value: {
            text: event.text,
            service: serviceInfo(event.service),
            chargedWei: { decimal: event.charged.toString() },
          },
        },
      };
    case 'retrying':
      return {
        event: {
          case: 'retrying',
          value: {
            jobId: event.jobId.toString(),
            failedAttempt: event.failedAttempt,
            reasonCode: event.reasonCode,
          },
        },
      };
    case 'failed':
      return failedEvent(event.error, event.jobSubmitted);
  }
}

function failedEvent(error: AppErrorType, jobSubmitted: boolean): RunCompletionEvent {
  const details: MessageInitShape<typeof ApiErrorDetailsSchema> = {
    code: error.code,
    message: error.message,
    accepts: (error.fields['accepts'] as PaymentOption[] | undefined) ?? [],
    ...(error.retryAfterSeconds !== undefined
      ? { retryAfterSeconds: Math.ceil(error.retryAfterSeconds) }
      : {}),
  };
  return { event: { case: 'failed', value: { error: details, jobSubmitted } } };
}

function serviceInfo(service: ServiceDescription): MessageInitShape<typeof ServiceInfoSchema> {
  return {
    jobId: service.jobId.toString(),
    sessionId: service.sessionId.toString(),
    txHash: { hex: service.txHash.toLowerCase() },
    worker: { hex: service.worker },
    ...(service.droppedMessages > 0 ? { droppedMessages: service.droppedMessages } : {}),
  };
}
