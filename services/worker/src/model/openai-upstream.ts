import { EventSourceParserStream } from 'eventsource-parser/stream';
import {
  ModelGenerationError,
  type GenerationEvent,
  type GenerationRequest,
  type ModelBackend,
} from './model-backend.js';

export interface OpenAiUpstreamOptions {
  /** Base URL of the OpenAI-compatible API, `/v1` included (Ollama: `http://127.0.0.1:11434/v1`). */
  readonly baseUrl: string;
  /** Served model name (on chain) → the upstream's model name; every key is a model this worker serves. */
  readonly modelMap: Readonly<Record<string, string>>;
  /** Sent as a bearer token when set; never logged. */
  readonly apiKey?: string;
  /** Longest wait for the response headers. */
  readonly responseTimeoutMs?: number;
  /** Longest silence between two streamed events once the response started. */
  readonly idleTimeoutMs?: number;
  readonly fetch?: typeof fetch;
}

const DEFAULT_RESPONSE_TIMEOUT_MS = 30_000;
const DEFAULT_IDLE_TIMEOUT_MS = 60_000;
const ERROR_BODY_PREVIEW_CHARS = 300;

interface ChatCompletionChunk {
  choices?: { delta?: { content?: string | null } }[];
  error?: { message?: string };
}

/**
 * A model server speaking OpenAI's `/v1/chat/completions` with `stream: true` (Ollama, vLLM,
 * llama.cpp server, …). Streams the text deltas; a timeout, an HTTP error or an error event ends the
 * generation with a {@link ModelGenerationError}.
 */
export class OpenAiUpstream implements ModelBackend {
  readonly models: readonly string[];
  readonly #endpoint: URL;
  readonly #modelMap: ReadonlyMap<string, string>;
  readonly #apiKey: string | undefined;
  readonly #responseTimeoutMs: number;
  readonly #idleTimeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: OpenAiUpstreamOptions) {
    this.#modelMap = new Map(Object.entries(options.modelMap));
    if (this.#modelMap.size === 0) throw new RangeError('the upstream model map names no model');
    this.models = [...this.#modelMap.keys()];
    this.#endpoint = new URL(
      'chat/completions',
      options.baseUrl.endsWith('/') ? options.baseUrl : `${options.baseUrl}/`,
    );
    this.#apiKey = options.apiKey;
    this.#responseTimeoutMs = options.responseTimeoutMs ?? DEFAULT_RESPONSE_TIMEOUT_MS;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.#fetch = options.fetch ?? fetch;
  }

  async *generate(request: GenerationRequest): AsyncIterable<GenerationEvent> {
    const upstreamModel = this.#modelMap.get(request.model);
    if (upstreamModel === undefined) {
      throw new ModelGenerationError(`model "${request.model}" is not mapped to an upstream model`);
    }
    const watchdog = new AbortController();
    const signal = AbortSignal.any([request.signal, watchdog.signal]);
    let timer = setTimeout(
      () => watchdog.abort(timeoutError('response', this.#responseTimeoutMs)),
      this.#responseTimeoutMs,
    );
    const rearm = (): void => {
      clearTimeout(timer);
      timer = setTimeout(
        () => watchdog.abort(timeoutError('idle', this.#idleTimeoutMs)),
        this.#idleTimeoutMs,
      );
    };
    try {
      const response = await this.#post(upstreamModel, request, signal);
      rearm();
      const events = response
        .body!.pipeThrough(new TextDecoderStream())
        .pipeThrough(new EventSourceParserStream());
      for await (const event of events) {
        rearm();
        if (event.data === '[DONE]') return;
        const text = contentOf(event.data);
        if (text) yield { kind: 'text', text };
      }
      throw new ModelGenerationError('the upstream stream ended without [DONE]');
    } catch (error) {
      if (request.signal.aborted) throw request.signal.reason;
      if (watchdog.signal.aborted) throw watchdog.signal.reason;
      if (error instanceof ModelGenerationError) throw error;
      throw new ModelGenerationError('the upstream model server could not be read', { cause: error });
    } finally {
      clearTimeout(timer);
      // Leaving early (abort, error, consumer stopped) must not leave the upstream generating.
      watchdog.abort();
    }
  }

  async #post(upstreamModel: string, request: GenerationRequest, signal: AbortSignal): Promise<Response> {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'text/event-stream',
    };
    if (this.#apiKey) headers.authorization = `Bearer ${this.#apiKey}`;
    const response = await this.#fetch(this.#endpoint, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        model: upstreamModel,
        stream: true,
        messages: request.messages.map(({ role, content }) => ({ role, content })),
      }),
      signal,
    });
    if (!response.ok || !response.body) {
      const body = await response.text().catch(() => '');
      throw new ModelGenerationError(
        `the upstream answered ${response.status}: ${body.slice(0, ERROR_BODY_PREVIEW_CHARS)}`,
      );
    }
    return response;
  }
}

function contentOf(data: string): string | undefined {
  let chunk: ChatCompletionChunk;
  try {
    chunk = JSON.parse(data) as ChatCompletionChunk;
  } catch (error) {
    throw new ModelGenerationError('the upstream sent an event that is not JSON', { cause: error });
  }
  if (chunk.error)
    throw new ModelGenerationError(`the upstream failed: ${chunk.error.message ?? 'unknown error'}`);
  const content = chunk.choices?.[0]?.delta?.content;
  return typeof content === 'string' ? content : undefined;
}

function timeoutError(phase: 'response' | 'idle', ms: number): ModelGenerationError {
  return new ModelGenerationError(
    phase === 'response'
      ? `the upstream did not answer within ${ms} ms`
      : `the upstream stream was silent for more than ${ms} ms`,
  );
}
