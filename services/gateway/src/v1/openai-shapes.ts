import type { JobDescription } from './completion-backend.js';

/** The `service` object of docs/api.md, also sent whole as the `x-service` header. */
export interface ServiceJson {
  readonly job_id: string;
  readonly session_id: string;
  readonly tx_hash: string;
  readonly worker: string;
  readonly dropped_messages?: number;
}

export function serviceJson(job: JobDescription): ServiceJson {
  return {
    job_id: job.jobId,
    session_id: job.sessionId,
    tx_hash: job.txHash,
    worker: job.worker,
    ...(job.droppedMessages === undefined ? {} : { dropped_messages: job.droppedMessages }),
  };
}

export function serviceHeader(job: JobDescription): string {
  return JSON.stringify(serviceJson(job));
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
export function chatCompletionJson(identity: CompletionIdentity, text: string, job: JobDescription) {
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
    service: serviceJson(job),
  };
}

type ChunkDelta = { readonly role?: 'assistant'; readonly content?: string };

/** One `chat.completion.chunk`; the last one carries `finish_reason` and the `service` object. */
export function chatCompletionChunkJson(
  identity: CompletionIdentity,
  delta: ChunkDelta,
  end?: { readonly job: JobDescription },
) {
  return {
    id: identity.id,
    object: 'chat.completion.chunk',
    created: identity.created,
    model: identity.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: end ? 'stop' : null }],
    ...(end ? { service: serviceJson(end.job) } : {}),
  };
}

/** `GET /v1/models` entry. */
export function modelJson(model: { id: string; created?: number; ownedBy?: string }) {
  // The orchestrator knows only names; 0 and `svc` keep the shape OpenAI clients expect.
  return { id: model.id, object: 'model', created: model.created ?? 0, owned_by: model.ownedBy ?? 'svc' };
}
