import type { MessageInitShape } from '@bufbuild/protobuf';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import type { ApiErrorDetails } from '@svc/proto/gen/svc/common/v1/error_pb';
import { ChatRole } from '@svc/proto/gen/svc/common/v1/chat_pb';
import type { PaymentOption } from '@svc/proto/gen/svc/common/v1/payment_option_pb';
import type { ServiceInfo as ServiceInfoMessage } from '@svc/proto/gen/svc/common/v1/service_info_pb';
import type {
  JobOrchestrator,
  RunCompletionRequestSchema,
} from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { isApiErrorName } from '@svc/api';
import { AppError, appErrorFromRpc, prepaidDebitRequirementsFromProto, type Logger } from '@svc/platform';
import { isRpcError, type ServiceClient } from '@svc/proto';
import type {
  ChatRole as GatewayChatRole,
  CompletionBackend,
  CompletionEvent,
  CompletionPayment,
  CompletionRequest,
  ModelListing,
  PaymentChain,
  ServiceInfo,
} from './completion-backend.js';

export type JobOrchestratorMethods = typeof JobOrchestrator extends GenService<infer S> ? S : never;
export type JobOrchestratorClient = ServiceClient<JobOrchestratorMethods>;

const ROLES: Record<GatewayChatRole, ChatRole> = {
  system: ChatRole.SYSTEM,
  developer: ChatRole.DEVELOPER,
  user: ChatRole.USER,
  assistant: ChatRole.ASSISTANT,
};

/**
 * The completion backend over the job-orchestrator's gRPC API. Unary calls carry the client's deadline;
 * the completion stream has none (a job takes what it takes) and is cancelled when the client leaves, which
 * tells the orchestrator to drop a call it has not submitted (its lifecycle events then settle the spend).
 */
export class OrchestratorBackend implements CompletionBackend {
  constructor(
    private readonly orchestrator: JobOrchestratorClient,
    private readonly logger: Logger,
  ) {}

  async listModels(): Promise<readonly ModelListing[]> {
    const { models } = await this.orchestrator.listModels({}).catch(asAppError);
    return models.map((model) => ({ id: model.id }));
  }

  async describeChain(): Promise<PaymentChain> {
    const described = await this.orchestrator.describeChain({}).catch(asAppError);
    // `chainId` is a JSON number: every chain in use fits one exactly. One that does not is refused, never
    // rounded into the id of another chain.
    if (described.chainId > BigInt(Number.MAX_SAFE_INTEGER))
      throw new Error(`the job-orchestrator sent chain id ${described.chainId}, beyond a JSON number`);
    if (described.jobRegistry === undefined) throw new Error('the job-orchestrator sent no job_registry');
    return {
      chainId: Number(described.chainId),
      jobRegistry: described.jobRegistry.hex,
      delegate: described.delegate?.hex,
    };
  }

  async quoteFee(model: string): Promise<bigint> {
    const { feeWei } = await this.orchestrator.quoteFee({ model }).catch(asAppError);
    return weiOf(feeWei?.decimal, 'fee_wei');
  }

  async *runCompletion(request: CompletionRequest, signal: AbortSignal): AsyncIterable<CompletionEvent> {
    const responses = this.orchestrator.runCompletion(
      {
        requestId: request.callId,
        model: request.model,
        messages: request.messages.map((message) => ({
          role: ROLES[message.role],
          content: message.content,
        })),
        conversationId: request.conversationId ?? '',
        stream: request.stream,
        payment: paymentMessage(request.payment),
      },
      { signal, requestId: request.callId },
    );
    try {
      for await (const { event } of responses) {
        switch (event.case) {
          case 'started':
            yield {
              case: 'started',
              service: serviceOf(event.value.service),
              feeWei: weiOf(event.value.feeWei?.decimal, 'fee_wei'),
            };
            break;
          case 'delta':
            yield { case: 'delta', text: event.value.text };
            break;
          case 'completed':
            yield {
              case: 'completed',
              text: event.value.text,
              service: serviceOf(event.value.service),
              chargedWei: weiOf(event.value.chargedWei?.decimal, 'charged_wei'),
            };
            return;
          case 'failed':
            yield {
              case: 'failed',
              error: appErrorOf(event.value.error),
              jobSubmitted: event.value.jobSubmitted,
            };
            return;
          case 'retrying':
            // Nothing reached the client yet: the job that answers names itself in `started`.
            this.logger.info(
              {
                callId: request.callId,
                jobId: event.value.jobId,
                failedAttempt: event.value.failedAttempt,
                reason: event.value.reasonCode,
              },
              'the job failed before its first output and is being retried in a new session',
            );
            break;
          case undefined:
            break;
        }
      }
    } catch (error) {
      throw isRpcError(error) ? appErrorFromRpc(error) : error;
    }
  }
}

function asAppError(error: unknown): never {
  throw isRpcError(error) ? appErrorFromRpc(error) : error;
}

function weiOf(decimal: string | undefined, field: string): bigint {
  if (decimal === undefined || !/^[0-9]{1,78}$/.test(decimal))
    throw new Error(`the job-orchestrator sent no valid ${field}`);
  return BigInt(decimal);
}

function serviceOf(service: ServiceInfoMessage | undefined): ServiceInfo {
  if (service === undefined) throw new Error('the job-orchestrator sent no service object');
  return {
    jobId: service.jobId,
    sessionId: service.sessionId,
    txHash: service.txHash?.hex ?? '',
    worker: service.worker?.hex ?? '',
    ...(service.droppedMessages !== undefined ? { droppedMessages: service.droppedMessages } : {}),
  };
}

/** The orchestrator's error as the catalogue error it names, with its public fields. */
function appErrorOf(details: ApiErrorDetails | undefined): AppError {
  if (details === undefined || !isApiErrorName(details.code))
    return new AppError('internal', {
      message: `the job-orchestrator failed a call with ${details?.code ?? 'no error'}`,
    });
  const fields: Record<string, unknown> = {};
  if (details.accepts.length > 0)
    fields.accepts = details.accepts.map(paymentOptionJson).filter((entry) => entry !== undefined);
  if (details.spendCapWei) fields.spend_cap_wei = details.spendCapWei.decimal;
  return new AppError(details.code, {
    message: details.message || undefined,
    fields,
    ...(details.retryAfterSeconds !== undefined ? { retryAfterSeconds: details.retryAfterSeconds } : {}),
  });
}

/** The oneof `payment` of RunCompletionRequest. */
function paymentMessage(
  payment: CompletionPayment,
): MessageInitShape<typeof RunCompletionRequestSchema>['payment'] {
  switch (payment.case) {
    case 'delegate':
      return {
        case: 'delegate',
        value: {
          wallet: { hex: payment.wallet },
          keyId: payment.keyId,
          reservationId: payment.reservationId,
          maxFeeWei: { decimal: payment.maxFeeWei.toString() },
        },
      };
    case 'prepaidDebit':
      return {
        case: 'prepaidDebit',
        value: {
          paymentReservationId: payment.paymentReservationId,
          payer: { hex: payment.payer },
          amountWei: { decimal: payment.amountWei.toString() },
          keyId: payment.keyId ?? '',
          spendReservationId: payment.spendReservationId ?? '',
        },
      };
  }
}

/** An `accepts` entry in the JSON shape of docs/protocol.md (the delegate-path 402, the prepaid-debit entry). */
function paymentOptionJson(option: PaymentOption): object | undefined {
  if (option.scheme.case === 'prepaidDebit') return prepaidDebitRequirementsFromProto(option.scheme.value);
  if (option.scheme.case !== 'delegate') return undefined;
  const { chainId, payer, delegate, instruction, transaction } = option.scheme.value;
  return {
    scheme: 'delegate',
    chain_id: Number(chainId),
    payer: payer?.hex,
    delegate: delegate?.hex,
    instruction: {
      contract: instruction?.contract?.hex,
      function: instruction?.function,
      args: instruction?.args ?? [],
      minimum_value_wei: instruction?.minimumValueWei?.decimal,
    },
    transaction: {
      to: transaction?.to?.hex,
      data: transaction?.data,
      value: transaction?.value?.decimal,
      chainId: Number(transaction?.chainId ?? chainId),
    },
  };
}
