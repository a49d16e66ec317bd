import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from '@svc/testkit';
import { call } from '../support/http.js';
import { startKeyService, type RunningKeyService } from '../support/key-service.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { listedKey, mintKey, type MintedKey } from './support/keys.js';
import { CHARGED_WEI, FEE_WEI, JOB, ScriptedBackend } from './support/scripted-backend.js';
import { startV1Gateway, type V1Gateway } from './support/v1-gateway.js';
import type { CompletionEvent, CompletionRequest, ServiceInfo } from '../../src/v1/completion-backend.js';

// Behaviours of docs/api.md that the other `/v1` suites do not pin down on their own.

/** The job of the `no-drops` model: nothing was left out, so `droppedMessages` is absent. */
const JOB_WITHOUT_DROPS: ServiceInfo = {
  jobId: JOB.jobId,
  sessionId: JOB.sessionId,
  txHash: JOB.txHash,
  worker: JOB.worker,
};

/** The scripted backend plus one model, `no-drops`, whose job reports no dropped messages. */
class BackendWithUndroppedJobs extends ScriptedBackend {
  override async *runCompletion(
    request: CompletionRequest,
    signal: AbortSignal,
  ): AsyncIterable<CompletionEvent> {
    if (request.model !== 'no-drops') {
      yield* super.runCompletion(request, signal);
      return;
    }
    this.requests.push(request);
    yield { case: 'started', service: JOB_WITHOUT_DROPS, feeWei: FEE_WEI };
    yield { case: 'delta', text: 'all kept' };
    yield { case: 'completed', text: 'all kept', service: JOB_WITHOUT_DROPS, chargedWei: CHARGED_WEI };
  }
}

let redis: TestStore;
let keyService: RunningKeyService;
let backend: BackendWithUndroppedJobs;
let gateway: V1Gateway;

const hello = [{ role: 'user' as const, content: 'hello' }];

function completion(minted: MintedKey, body: Record<string, unknown>) {
  return call(gateway.baseUrl, 'POST', '/v1/chat/completions', { token: minted.key, body });
}

/** A raw `fetch` of a completion, so a test sees the SSE bytes exactly as they went out. */
function rawCompletion(minted: MintedKey, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${gateway.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${minted.key}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** The `data` of every server-sent event in `raw`, in order (multi-line data joined by newlines). */
function sseData(raw: string): string[] {
  return raw
    .split(/\r?\n\r?\n/)
    .filter((block) => block.trim() !== '')
    .map((block) =>
      block
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice('data:'.length).replace(/^ /, ''))
        .join('\n'),
    );
}

function requestsOf(minted: MintedKey): CompletionRequest[] {
  return backend.requests.filter((request) => request.payment.keyId === minted.id);
}

/** A streamed `hold` call that has received its first chunk: the backend is running it. */
async function openHeldStream(minted: MintedKey) {
  const response = await rawCompletion(minted, { model: 'hold', messages: hello, stream: true });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = decoder.decode((await reader.read()).value);
  return {
    headers: response.headers,
    /** The whole body, once the held call is released. */
    rest: async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return text;
        text += decoder.decode(value, { stream: true });
      }
    },
  };
}

function expectServiceObject(header: string | null): Record<string, unknown> {
  expect(header).not.toBeNull();
  const service = JSON.parse(header!) as Record<string, unknown>;
  expect(service).toMatchObject({
    job_id: JOB.jobId,
    session_id: JOB.sessionId,
    tx_hash: JOB.txHash,
    worker: JOB.worker,
  });
  return service;
}

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  backend = new BackendWithUndroppedJobs();
  gateway = await startV1Gateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    completions: backend,
    env: { V1_KEY_RATE_LIMIT: '1000' },
  });
});

afterAll(async () => {
  backend?.releaseHeld();
  await gateway?.close();
  await keyService?.close();
  await redis?.cleanup();
});

describe('spend cap: the fee is reserved before the job runs', () => {
  it('never runs the job of a call refused 402 spend_cap_exceeded', async () => {
    const capped = await mintKey(gateway.baseUrl, { spendCapWei: String(FEE_WEI) });
    expect((await completion(capped, { model: 'echo:1b', messages: hello })).status).toBe(200);
    expect(requestsOf(capped)).toHaveLength(1);

    // Spent CHARGED_WEI of a cap of one fee: the next fee no longer fits.
    const refused = await completion(capped, { model: 'echo:1b', messages: hello });
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({
      error: { code: 'spend_cap_exceeded', spend_cap_wei: String(FEE_WEI) },
    });
    expect(requestsOf(capped)).toHaveLength(1);
  });

  it('counts the fee of a running call against the cap: a concurrent second call is refused', async () => {
    const capped = await mintKey(gateway.baseUrl, { spendCapWei: String(FEE_WEI) });
    const held = await openHeldStream(capped);
    expect((await listedKey(gateway.baseUrl, capped)).spentWei).toBe('0');

    const refused = await completion(capped, { model: 'echo:1b', messages: hello });
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({
      error: { code: 'spend_cap_exceeded', spend_cap_wei: String(FEE_WEI) },
    });
    expect(requestsOf(capped).map((request) => request.model)).toEqual(['hold']);

    backend.releaseHeld();
    expect((await held.rest()).trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect((await listedKey(gateway.baseUrl, capped)).spentWei).toBe(String(CHARGED_WEI));
  });
});

describe('a call running when its key is revoked or deleted', () => {
  it.each([
    ['revoked', false],
    ['revoked and deleted', true],
  ])('finishes and is answered when the key is %s meanwhile', async (_state, deleteToo) => {
    const minted = await mintKey(gateway.baseUrl);
    const running = completion(minted, { model: 'hold', messages: hello });
    await waitFor(() => requestsOf(minted).length === 1 || undefined, {
      what: 'the held call to reach the backend',
    });

    const revoked = await call(gateway.baseUrl, 'POST', `/api/api-keys/${minted.id}/revoke`, {
      token: minted.token,
    });
    expect(revoked.status).toBe(204);
    if (deleteToo) {
      const deleted = await call(gateway.baseUrl, 'DELETE', `/api/api-keys/${minted.id}`, {
        token: minted.token,
      });
      expect(deleted.status).toBe(204);
    }
    backend.releaseHeld();

    const answer = await running;
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({
      object: 'chat.completion',
      choices: [{ message: { role: 'assistant', content: 'held answer' }, finish_reason: 'stop' }],
    });

    const next = await completion(minted, { model: 'echo:1b', messages: hello });
    expect(next.status).toBe(401);
    expect(next.body).toMatchObject({ error: { code: 'invalid_api_key' } });
    expect(requestsOf(minted)).toHaveLength(1);
  });
});

describe('streams on the wire', () => {
  let key: MintedKey;
  beforeAll(async () => {
    key = await mintKey(gateway.baseUrl);
  });

  it('ends a stream that failed after its first chunk with exactly one error event and no [DONE]', async () => {
    const response = await rawCompletion(key, { model: 'fail-after', messages: hello, stream: true });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const raw = await response.text();
    expect(raw).not.toContain('data: [DONE]');

    const events = sseData(raw);
    const errors = events.filter((data) => 'error' in (JSON.parse(data) as object));
    expect(errors).toHaveLength(1);
    expect(JSON.parse(errors[0]!)).toMatchObject({ error: { code: 'job_failed' } });
    // The error event is the stream's end, after the chunks that went out.
    expect(events.at(-1)).toBe(errors[0]);
    expect(events.some((data) => data.includes('partial '))).toBe(true);
  });

  it('ends a successful stream with [DONE], the chunk before it carrying the service object', async () => {
    const response = await rawCompletion(key, { model: 'echo:1b', messages: hello, stream: true });
    expect(response.status).toBe(200);
    const headerService = expectServiceObject(response.headers.get('x-service'));
    const raw = await response.text();
    const dataLines = raw.split(/\r?\n/).filter((line) => line.startsWith('data:'));
    expect(dataLines.at(-1)).toBe('data: [DONE]');

    const events = sseData(raw);
    expect(events.filter((data) => data === '[DONE]')).toHaveLength(1);
    const last = JSON.parse(events.at(-2)!) as { service?: unknown; choices: unknown[] };
    expect(last.service).toEqual(headerService);
    expect(last.choices).toEqual([expect.objectContaining({ finish_reason: 'stop' })]);
  });

  it('sends x-service from the start of a stream, while the job is still running', async () => {
    const held = await openHeldStream(key);
    // Headers and a first chunk are out, yet the job has not completed: x-service must already be here.
    expect(held.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const service = expectServiceObject(held.headers.get('x-service'));
    for (const field of ['job_id', 'session_id', 'tx_hash', 'worker'])
      expect(typeof service[field]).toBe('string');

    backend.releaseHeld();
    expect((await held.rest()).trimEnd().endsWith('data: [DONE]')).toBe(true);
  });
});

describe('request forms docs/api.md accepts', () => {
  let key: MintedKey;
  beforeAll(async () => {
    key = await mintKey(gateway.baseUrl);
  });

  it('accepts system and developer roles alongside user and assistant, and content as text parts', async () => {
    const answer = await completion(key, {
      model: 'echo:1b',
      messages: [
        { role: 'system', content: [{ type: 'text', text: 'be brief' }] },
        { role: 'developer', content: 'answer in English' },
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: [{ type: 'text', text: 'hello' }] },
        {
          role: 'user',
          content: [
            { type: 'text', text: 'how' },
            { type: 'text', text: 'are you' },
          ],
        },
      ],
    });
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ object: 'chat.completion' });
    expect(requestsOf(key).at(-1)?.messages).toEqual([
      { role: 'system', content: 'be brief' },
      { role: 'developer', content: 'answer in English' },
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
      { role: 'user', content: 'how\nare you' },
    ]);
  });

  it('accepts a conversation_id of exactly 64 characters and refuses one of 65 with 400 code null', async () => {
    const longest = 'c'.repeat(64);
    const accepted = await completion(key, { model: 'echo:1b', messages: hello, conversation_id: longest });
    expect(accepted.status).toBe(200);
    expect(requestsOf(key).at(-1)?.conversationId).toBe(longest);

    const before = requestsOf(key).length;
    const refused = await completion(key, {
      model: 'echo:1b',
      messages: hello,
      conversation_id: `${longest}c`,
    });
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({ error: { code: null, type: 'invalid_request_error' } });
    expect(requestsOf(key)).toHaveLength(before);
  });
});

describe('dropped_messages', () => {
  let key: MintedKey;
  beforeAll(async () => {
    key = await mintKey(gateway.baseUrl);
  });

  it('is present when the backend dropped messages', async () => {
    const answer = await completion(key, { model: 'echo:1b', messages: hello });
    expect(answer.body).toMatchObject({ service: { dropped_messages: JOB.droppedMessages } });
  });

  it('is absent from the service object and header when the backend dropped none', async () => {
    const answer = await completion(key, { model: 'no-drops', messages: hello });
    expect(answer.status).toBe(200);
    const { service } = answer.body as { service: Record<string, unknown> };
    expect(service).toEqual({
      job_id: JOB.jobId,
      session_id: JOB.sessionId,
      tx_hash: JOB.txHash,
      worker: JOB.worker,
    });
    expect(service).not.toHaveProperty('dropped_messages');
    expect(expectServiceObject(answer.headers.get('x-service'))).not.toHaveProperty('dropped_messages');

    const streamed = await rawCompletion(key, { model: 'no-drops', messages: hello, stream: true });
    expect(expectServiceObject(streamed.headers.get('x-service'))).not.toHaveProperty('dropped_messages');
    const events = sseData(await streamed.text());
    const last = JSON.parse(events.at(-2)!) as { service: Record<string, unknown> };
    expect(last.service).toEqual(service);
  });
});
