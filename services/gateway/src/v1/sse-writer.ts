import { once } from 'node:events';
import type { ChatCompletionChunkJson, StreamErrorEvent } from '@svc/api';
import type { Response } from 'express';

/**
 * Server-sent events of one streamed completion. Writes wait for the socket to drain, so a slow client
 * holds the relay back instead of filling memory; `signal` (the client going away) ends the wait.
 */
export class SseWriter {
  constructor(
    private readonly res: Response,
    private readonly signal: AbortSignal,
  ) {}

  /** Writes the status and headers with the first event: docs/api.md promises `x-service` from the start. */
  open(headers: Record<string, string>): void {
    this.res.status(200).set({
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      // Proxies such as nginx must not buffer the stream.
      'x-accel-buffering': 'no',
      ...headers,
    });
  }

  async data(payload: ChatCompletionChunkJson | StreamErrorEvent): Promise<void> {
    await this.#write(`data: ${JSON.stringify(payload)}\n\n`);
  }

  async done(): Promise<void> {
    await this.#write('data: [DONE]\n\n');
    this.res.end();
  }

  /** Ends a stream after its first chunk with an error event in place of `[DONE]`. */
  async fail(errorPayload: StreamErrorEvent): Promise<void> {
    await this.data(errorPayload);
    this.res.end();
  }

  async #write(text: string): Promise<void> {
    if (this.res.write(text)) return;
    await once(this.res, 'drain', { signal: this.signal });
  }
}
