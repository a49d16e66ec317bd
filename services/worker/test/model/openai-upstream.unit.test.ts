import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { waitFor } from '@svc/testkit';
import { ModelGenerationError, OpenAiUpstream, type GenerationEvent } from '../../src/model/index.js';

/** What the fake upstream does with the next request. */
type Behaviour =
  | { kind: 'stream'; deltas: string[]; done?: boolean; delayMs?: number }
  | { kind: 'status'; status: number; body: string }
  | { kind: 'silent-after'; deltas: string[] }
  | { kind: 'error-event' };

interface RecordedRequest {
  url: string;
  authorization: string | undefined;
  body: { model: string; stream: boolean; messages: { role: string; content: string }[] };
}

let server: Server;
let baseUrl: string;
let behaviour: Behaviour;
const requests: RecordedRequest[] = [];
const closedEarly: boolean[] = [];

function sse(res: ServerResponse, data: unknown): void {
  res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
}

function deltaChunk(content: string) {
  return { id: 'chatcmpl-1', object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }] };
}

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  let raw = '';
  for await (const part of req) raw += String(part);
  requests.push({ url: req.url ?? '', authorization: req.headers.authorization, body: JSON.parse(raw) });
  res.on('close', () => closedEarly.push(!res.writableEnded));
  if (behaviour.kind === 'status') {
    res.writeHead(behaviour.status, { 'content-type': 'application/json' }).end(behaviour.body);
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  // Role-only first chunk, as real servers send it.
  sse(res, { choices: [{ index: 0, delta: { role: 'assistant' } }] });
  if (behaviour.kind === 'error-event') {
    sse(res, { error: { message: 'model overloaded' } });
    res.end();
    return;
  }
  for (const delta of behaviour.deltas) {
    if (behaviour.kind === 'stream' && behaviour.delayMs) {
      await new Promise((resolve) =>
        setTimeout(resolve, behaviour.kind === 'stream' ? behaviour.delayMs : 0),
      );
    }
    if (res.destroyed) return;
    sse(res, deltaChunk(delta));
  }
  if (behaviour.kind === 'silent-after') return; // never ends: the idle timeout must fire
  if (behaviour.done !== false) sse(res, '[DONE]');
  res.end();
}

beforeAll(async () => {
  server = createServer((req, res) => void handle(req, res));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  server.closeAllConnections();
  server.close();
});

beforeEach(() => {
  requests.length = 0;
  closedEarly.length = 0;
});

function upstream(overrides: Partial<ConstructorParameters<typeof OpenAiUpstream>[0]> = {}) {
  return new OpenAiUpstream({ baseUrl, modelMap: { 'llama3:8b': 'llama3-8b-instruct' }, ...overrides });
}

async function run(backend: OpenAiUpstream, signal = new AbortController().signal) {
  const events: GenerationEvent[] = [];
  try {
    const messages = [{ role: 'user', content: 'Hello?' }];
    for await (const event of backend.generate({ model: 'llama3:8b', messages, signal })) events.push(event);
    return { events, error: undefined as unknown };
  } catch (error) {
    return { events, error };
  }
}

describe('OpenAiUpstream', () => {
  it('streams the deltas of /v1/chat/completions under the mapped model name', async () => {
    behaviour = { kind: 'stream', deltas: ['Hel', 'lo ', 'there'] };
    const { events, error } = await run(upstream({ apiKey: 'sk-upstream' }));
    expect(error).toBeUndefined();
    expect(events).toEqual([
      { kind: 'text', text: 'Hel' },
      { kind: 'text', text: 'lo ' },
      { kind: 'text', text: 'there' },
    ]);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.url).toBe('/v1/chat/completions');
    expect(requests[0]!.authorization).toBe('Bearer sk-upstream');
    expect(requests[0]!.body).toEqual({
      model: 'llama3-8b-instruct',
      stream: true,
      messages: [{ role: 'user', content: 'Hello?' }],
    });
  });

  it('serves only the mapped models', async () => {
    expect(upstream().models).toEqual(['llama3:8b']);
    const events = upstream().generate({
      model: 'other',
      messages: [],
      signal: new AbortController().signal,
    });
    await expect(events[Symbol.asyncIterator]().next()).rejects.toBeInstanceOf(ModelGenerationError);
  });

  it('turns an HTTP error into a generation error', async () => {
    behaviour = { kind: 'status', status: 503, body: '{"error":{"message":"loading"}}' };
    const { error } = await run(upstream());
    expect(error).toBeInstanceOf(ModelGenerationError);
    expect((error as Error).message).toContain('503');
  });

  it('turns an in-stream error event into a generation error', async () => {
    behaviour = { kind: 'error-event' };
    const { error } = await run(upstream());
    expect(error).toBeInstanceOf(ModelGenerationError);
    expect((error as Error).message).toContain('model overloaded');
  });

  it('treats a stream cut before [DONE] as a failure', async () => {
    behaviour = { kind: 'stream', deltas: ['partial'], done: false };
    const { events, error } = await run(upstream());
    expect(events).toEqual([{ kind: 'text', text: 'partial' }]);
    expect(error).toBeInstanceOf(ModelGenerationError);
  });

  it('gives up on a silent stream after the idle timeout and closes the request', async () => {
    behaviour = { kind: 'silent-after', deltas: ['one'] };
    const { events, error } = await run(upstream({ idleTimeoutMs: 200 }));
    expect(events).toEqual([{ kind: 'text', text: 'one' }]);
    expect(error).toBeInstanceOf(ModelGenerationError);
    expect((error as Error).message).toContain('silent');
    await waitFor(() => closedEarly.length === 1 || undefined, { what: 'the upstream request closed' });
    expect(closedEarly).toEqual([true]);
  });

  it('stops the upstream request when the job is aborted', async () => {
    behaviour = { kind: 'stream', deltas: ['a', 'b', 'c', 'd', 'e', 'f'], delayMs: 100 };
    const controller = new AbortController();
    const backend = upstream();
    const events: GenerationEvent[] = [];
    const pending = (async () => {
      for await (const event of backend.generate({
        model: 'llama3:8b',
        messages: [{ role: 'user', content: 'x' }],
        signal: controller.signal,
      })) {
        events.push(event);
        controller.abort(new Error('job deadline'));
      }
    })();
    await expect(pending).rejects.toThrow('job deadline');
    expect(events).toHaveLength(1);
    await waitFor(() => closedEarly.length === 1 || undefined, { what: 'the upstream request closed' });
    expect(closedEarly).toEqual([true]);
  });
});
