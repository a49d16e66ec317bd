import type {
  ChatCompletionChunkJson,
  ChatCompletionDelta,
  ChatCompletionJson,
  ModelJson,
  ServiceObject,
} from '@svc/api';
import type { ServiceInfo } from './completion-backend.js';

/** The `service` object of docs/api.md, also sent whole as the `x-service` header. */
export function serviceJson(service: ServiceInfo): ServiceObject {
  return {
    job_id: service.jobId,
    session_id: service.sessionId,
    tx_hash: service.txHash,
    worker: service.worker,
    ...(service.droppedMessages === undefined ? {} : { dropped_messages: service.droppedMessages }),
  };
}

export function serviceHeader(service: ServiceInfo): string {
  return JSON.stringify(serviceJson(service));
}

/** What every object of one completion shares. */
export interface CompletionIdentity {
  /** `chatcmpl-...`. */
  readonly id: string;
  /** Unix seconds. */
  readonly created: number;
  readonly model: string;
}

/** An OpenAI `chat.completion` with exactly one choice, no `usage`, plus `service`. */
export function chatCompletionJson(
  identity: CompletionIdentity,
  text: string,
  service: ServiceInfo,
): ChatCompletionJson {
  return {
    id: identity.id,
    object: 'chat.completion',
    created: identity.created,
    model: identity.model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: text, refusal: null },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    service: serviceJson(service),
  };
}

/** One `chat.completion.chunk`; the last one carries `finish_reason` and the `service` object. */
export function chatCompletionChunkJson(
  identity: CompletionIdentity,
  delta: ChatCompletionDelta,
  end?: { readonly service: ServiceInfo },
): ChatCompletionChunkJson {
  return {
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: end ? 'stop' : null }],
    ...(end ? { service: serviceJson(end.service) } : {}),
  };
}

/** `GET /v1/models` entry. */
export function modelJson(model: { id: string; created?: number; ownedBy?: string }): ModelJson {
  // The orchestrator knows only names; 0 and `svc` keep the shape OpenAI clients expect.
  return { id: model.id, object: 'model', created: model.created ?? 0, owned_by: model.ownedBy ?? 'svc' };
}
