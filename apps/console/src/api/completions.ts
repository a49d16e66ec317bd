import { createParser } from 'eventsource-parser';
import { ServiceError, unreachable } from './api-error.js';

// The playground calls `/v1` the way any OpenAI client does: fetch, and the stream read with a small SSE
// parser. (The official `openai` package would work too, but would add ~400 kB to the page; the e2e tests
// drive /v1 with it.)

/** The `service` object of docs/api.md: the on-chain job that answered. */
export interface ServiceInfo {
  readonly job_id: string;
  readonly session_id: string;
  readonly tx_hash: string;
  readonly worker: string;
  readonly dropped_messages?: number;
}

export interface ChatTurn {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

export async function listModels(apiKey: string): Promise<string[]> {
  const response = await send('GET', '/v1/models', apiKey);
  const body = (await response.json()) as { data?: { id: string }[] };
  return (body.data ?? []).map((model) => model.id);
}

/**
 * Streams one completion: `onText` gets each piece of the answer as it arrives; resolves with the
 * `service` object of the last chunk. A refusal before the first chunk (an HTTP error) and an error event
 * after it both reject with a ServiceError carrying the code. Aborting `signal` rejects with its AbortError.
 */
export async function streamCompletion(
  apiKey: string,
  request: { model: string; messages: readonly ChatTurn[]; conversationId: string },
  onText: (text: string) => void,
  signal: AbortSignal,
): Promise<ServiceInfo | undefined> {
  const response = await send(
    'POST',
    '/v1/chat/completions',
    apiKey,
    {
      model: request.model,
      messages: request.messages,
      stream: true,
      // The service's extension: keeps the conversation on the session that served it.
      conversation_id: request.conversationId,
    },
    signal,
  );
  let service: ServiceInfo | undefined;
  let failure: ServiceError | undefined;
  let done = false;
  const parser = createParser({
    onEvent({ data }) {
      if (done || failure) return;
      if (data === '[DONE]') {
        done = true;
        return;
      }
      const chunk = JSON.parse(data) as {
        error?: { code?: string; message?: string };
        choices?: { delta?: { content?: string } }[];
        service?: ServiceInfo;
      };
      if (chunk.error) {
        failure = new ServiceError(
          200,
          chunk.error.code ?? null,
          chunk.error.message ?? 'The stream failed.',
        );
        return;
      }
      const text = chunk.choices?.[0]?.delta?.content;
      if (text) onText(text);
      if (chunk.service) service = chunk.service;
    },
  });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done: ended } = await reader.read();
    if (ended) break;
    parser.feed(value);
  }
  if (failure) throw failure;
  if (!done) throw new ServiceError(200, null, 'The stream ended before the answer was complete.');
  return service;
}

/** One `/v1` call; an error status becomes a ServiceError with the body's code and extra fields. */
async function send(
  method: string,
  path: string,
  apiKey: string,
  body?: unknown,
  signal?: AbortSignal,
): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      cache: 'no-store',
      ...(signal ? { signal } : {}),
    });
  } catch (error) {
    if (signal?.aborted) throw error;
    throw unreachable(error);
  }
  if (response.ok) return response;
  const answer = ((await response.json().catch(() => undefined)) ?? {}) as {
    error?: Record<string, unknown>;
  };
  const error = answer.error ?? {};
  const retryAfter = Number(response.headers.get('retry-after'));
  throw new ServiceError(
    response.status,
    typeof error['code'] === 'string' ? error['code'] : null,
    typeof error['message'] === 'string' ? error['message'] : `The service answered ${response.status}.`,
    { ...error, ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retry_after: retryAfter } : {}) },
  );
}
