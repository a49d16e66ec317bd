import type { ChatCompletionChunkJson, ServiceObject, StreamErrorEvent } from '@svc/api';
import { createParser } from 'eventsource-parser';
import { ServiceError } from './api-error.js';
import { request } from './request.js';

// The playground calls `/v1` the way any OpenAI client does: fetch, and the stream read with a small SSE
// parser. (The official `openai` package would work too, but would add ~400 kB to the page; the e2e tests
// drive /v1 with it.)

export interface ChatTurn {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

export async function listModels(apiKey: string): Promise<string[]> {
  const response = await request('GET', '/v1/models', { bearer: apiKey });
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
  call: { model: string; messages: readonly ChatTurn[]; conversationId: string },
  onText: (text: string) => void,
  signal: AbortSignal,
): Promise<ServiceObject | undefined> {
  const response = await request('POST', '/v1/chat/completions', {
    bearer: apiKey,
    body: {
      model: call.model,
      messages: call.messages,
      stream: true,
      // The service's extension: keeps the conversation on the session that served it.
      conversation_id: call.conversationId,
    },
    signal,
  });
  return readCompletionStream(response.body!, onText);
}

/**
 * Reads a completion's event stream (docs/api.md, Streaming): `chat.completion.chunk`s, then `[DONE]`; or
 * an error event in its place after the first chunk. Resolves with the `service` object of the last chunk;
 * rejects on the error event, on an event that is not JSON, and on a stream that ends without `[DONE]`.
 */
export async function readCompletionStream(
  body: ReadableStream<Uint8Array>,
  onText: (text: string) => void,
): Promise<ServiceObject | undefined> {
  let service: ServiceObject | undefined;
  let outcome: 'done' | ServiceError | undefined;
  const parser = createParser({
    onEvent({ data }) {
      if (outcome !== undefined) return;
      if (data === '[DONE]') {
        outcome = 'done';
        return;
      }
      // A chunk, or the error event in place of `[DONE]`; read defensively, as another server may send either.
      let chunk: Partial<ChatCompletionChunkJson> & Partial<StreamErrorEvent>;
      try {
        chunk = JSON.parse(data) as typeof chunk;
      } catch {
        outcome = new ServiceError(200, null, 'The stream sent an event that is not JSON.');
        return;
      }
      if (chunk.error) {
        outcome = new ServiceError(
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
  const reader = body.getReader();
  // One decoder for the whole stream: a character split between two reads is decoded whole.
  const decoder = new TextDecoder();
  try {
    while (outcome === undefined) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.feed(decoder.decode(value, { stream: true }));
    }
  } finally {
    // Nothing after [DONE] or an error event matters; let the connection go.
    void reader.cancel().catch(() => undefined);
  }
  if (outcome instanceof ServiceError) throw outcome;
  if (outcome !== 'done')
    throw new ServiceError(200, null, 'The stream ended before the answer was complete.');
  return service;
}
