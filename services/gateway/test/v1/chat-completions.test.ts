import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { testServiceClientOptions } from '@svc/platform/testing';
import { closeClient, createClient } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { SpendReservationState } from '@svc/proto/gen/svc/key/v1/spend_reservation_pb';
import { waitFor } from '@svc/testkit';
import OpenAI, { APIError } from 'openai';
import { call } from '../support/http.js';
import { startKeyService, type RunningKeyService } from '../support/key-service.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { listedKey, mintKey, type MintedKey } from './support/keys.js';
import { CHARGED_WEI, delegatePaymentOf, FEE_WEI, JOB, ScriptedBackend } from './support/scripted-backend.js';
import { startV1Gateway, type V1Gateway } from './support/v1-gateway.js';

const EXPECTED_SERVICE = {
  job_id: JOB.jobId,
  session_id: JOB.sessionId,
  tx_hash: JOB.txHash,
  worker: JOB.worker,
  dropped_messages: JOB.droppedMessages,
};

let redis: TestStore;
let keyService: RunningKeyService;
let backend: ScriptedBackend;
let gateway: V1Gateway;
let unconfigured: V1Gateway;
let key: MintedKey;

function sdk(apiKey: string, baseUrl = gateway.baseUrl): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${baseUrl}/v1`, maxRetries: 0 });
}

const hello = [{ role: 'user' as const, content: 'hello' }];

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  backend = new ScriptedBackend();
  gateway = await startV1Gateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    completions: backend,
    env: { V1_KEY_RATE_LIMIT: '1000' },
  });
  unconfigured = await startV1Gateway({ keyServiceAddress: keyService.address, store: redis.open() });
  key = await mintKey(gateway.baseUrl);
});

afterAll(async () => {
  await Promise.all([gateway?.close(), unconfigured?.close()]);
  await keyService?.close();
  await redis?.cleanup();
});

describe('GET /v1/models', () => {
  it("lists the backend's models in OpenAI's shape through the SDK", async () => {
    const models = [];
    for await (const model of sdk(key.key).models.list()) models.push(model);
    expect(models).toEqual([
      { id: 'echo:1b', object: 'model', created: 1_700_000_000, owned_by: 'worker-pool' },
      { id: 'hold', object: 'model', created: 0, owned_by: 'svc' },
    ]);
  });

  it('lists no models on a server without a backend', async () => {
    const answer = await call(unconfigured.baseUrl, 'GET', '/v1/models', { token: key.key });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ object: 'list', data: [] });
  });
});

describe('request validation', () => {
  const cases: [string, unknown, RegExp][] = [
    ['missing model', { messages: hello }, /model is required/],
    ['missing messages', { model: 'echo:1b' }, /messages is required/],
    ['empty messages', { model: 'echo:1b', messages: [] }, /at least one message/],
    [
      'unsupported role',
      { model: 'echo:1b', messages: [{ role: 'narrator', content: 'x' }, ...hello] },
      /role "narrator" is not supported/,
    ],
    [
      'tool role',
      { model: 'echo:1b', messages: [{ role: 'tool', content: 'x' }, ...hello] },
      /function calling/,
    ],
    [
      'content not a string or text parts',
      { model: 'echo:1b', messages: [{ role: 'user', content: 42 }] },
      /string or a list of text parts/,
    ],
    [
      'image part',
      {
        model: 'echo:1b',
        messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://x/y.png' } }] }],
      },
      /Image content parts are not supported/,
    ],
    [
      'tools',
      { model: 'echo:1b', messages: hello, tools: [{ type: 'function', function: { name: 'f' } }] },
      /Tools and function calling are not supported/,
    ],
    [
      'assistant tool calls',
      {
        model: 'echo:1b',
        messages: [{ role: 'assistant', content: 'x', tool_calls: [{ id: '1' }] }, ...hello],
      },
      /Tools and function calling are not supported/,
    ],
    [
      'last message not the user',
      { model: 'echo:1b', messages: [...hello, { role: 'assistant', content: 'hi' }] },
      /last message must be the user's/,
    ],
    [
      'conversation_id not a string',
      { model: 'echo:1b', messages: hello, conversation_id: 7 },
      /conversation_id must be a string/,
    ],
    [
      'conversation_id too long',
      { model: 'echo:1b', messages: hello, conversation_id: 'c'.repeat(65) },
      /at most 64 characters/,
    ],
    ['stream not boolean', { model: 'echo:1b', messages: hello, stream: 'yes' }, /stream must be a boolean/],
  ];

  it.each(cases)('answers 400 with code null for %s', async (_name, body, message) => {
    const answer = await call(gateway.baseUrl, 'POST', '/v1/chat/completions', { token: key.key, body });
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({
      error: {
        message: expect.stringMatching(message),
        type: 'invalid_request_error',
        param: expect.any(String),
        code: null,
      },
    });
  });

  it('answers 400 for a body that is not JSON and for a content type that is not JSON', async () => {
    const notJson = await call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
      token: key.key,
      rawBody: '{"model": ',
      headers: { 'content-type': 'application/json' },
    });
    expect(notJson.status).toBe(400);
    expect(notJson.body).toMatchObject({ error: { code: null, message: 'The body is not valid JSON.' } });

    const plain = await call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
      token: key.key,
      rawBody: JSON.stringify({ model: 'echo:1b', messages: hello }),
      headers: { 'content-type': 'text/plain' },
    });
    expect(plain.status).toBe(400);
    expect(plain.body).toMatchObject({
      error: { code: null, message: expect.stringMatching(/Content-Type/) },
    });
  });

  it('accepts and ignores other OpenAI fields, joins text parts, and takes a body of a few MiB', async () => {
    const history = Array.from({ length: 300 }, (_, i) => ({
      role: i % 2 === 0 ? 'user' : 'assistant',
      content: 'x'.repeat(8 * 1024),
    }));
    const answer = await call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
      token: key.key,
      body: {
        model: 'echo:1b',
        temperature: 0.2,
        max_tokens: 12,
        top_p: 1,
        conversation_id: 'conv-1',
        messages: [
          ...history,
          {
            role: 'user',
            content: [
              { type: 'text', text: 'one' },
              { type: 'text', text: 'two' },
            ],
          },
        ],
      },
    });
    expect(answer.status).toBe(200);
    const request = backend.requests.at(-1)!;
    expect(request.messages).toHaveLength(301);
    expect(request.messages.at(-1)).toEqual({ role: 'user', content: 'one\ntwo' });
    expect(request.conversationId).toBe('conv-1');
  });

  it('answers 503 not_configured for a valid call on a server without a backend', async () => {
    const answer = await call(unconfigured.baseUrl, 'POST', '/v1/chat/completions', {
      token: key.key,
      body: { model: 'echo:1b', messages: hello },
    });
    expect(answer.status).toBe(503);
    expect(answer.body).toMatchObject({ error: { code: 'not_configured', type: 'server_error' } });
  });

  it('answers 404 model_not_found when the backend knows no such model', async () => {
    const error = await sdk(key.key)
      .chat.completions.create({ model: 'missing', messages: hello })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).status).toBe(404);
    expect((error as APIError).code).toBe('model_not_found');
  });
});

describe('answers', () => {
  it('returns a chat.completion with the service object and the x-service header', async () => {
    const { data, response } = await sdk(key.key)
      .chat.completions.create({ model: 'echo:1b', messages: hello })
      .withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.choices).toHaveLength(1);
    expect(data.choices[0]?.message.content).toBe('echo: hello');
    expect(data.choices[0]?.finish_reason).toBe('stop');
    expect(data.usage).toBeUndefined();
    expect((data as unknown as { service: unknown }).service).toEqual(EXPECTED_SERVICE);
    expect(JSON.parse(response.headers.get('x-service')!)).toEqual(EXPECTED_SERVICE);
  });

  it('streams chunks through the SDK iterator, the last one carrying service, ending with [DONE]', async () => {
    const { data: stream, response } = await sdk(key.key)
      .chat.completions.create({ model: 'echo:1b', messages: hello, stream: true })
      .withResponse();
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(JSON.parse(response.headers.get('x-service')!)).toEqual(EXPECTED_SERVICE);
    let text = '';
    let last: unknown;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      last = chunk;
    }
    expect(text).toBe('echo: hello');
    expect(last).toMatchObject({ choices: [{ finish_reason: 'stop' }], service: EXPECTED_SERVICE });

    const raw = await fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo:1b', messages: hello, stream: true }),
    });
    expect((await raw.text()).trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it('fails before the first chunk as an ordinary HTTP error', async () => {
    for (const [model, status, code] of [
      ['fail-before', 502, 'job_failed'],
      ['no-worker', 503, 'no_worker_available'],
    ] as const) {
      const error = await sdk(key.key)
        .chat.completions.create({ model, messages: hello, stream: true })
        .catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).status).toBe(status);
      expect((error as APIError).code).toBe(code);
    }
  });

  it.each([
    ['fail-after', 'job_failed'],
    ['diverge', 'stream_diverged'],
  ])(
    'ends a stream that failed after its first chunk (%s) with an error event, not [DONE]',
    async (model, code) => {
      const stream = await sdk(key.key).chat.completions.create({ model, messages: hello, stream: true });
      let text = '';
      const error = await (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
      })().catch((caught: unknown) => caught);
      expect(text).toBe('partial ');
      expect(error).toBeInstanceOf(APIError);
      expect((error as APIError).code).toBe(code);
    },
  );
});

describe('spend reservations', () => {
  async function settleAsLifecycle(settle: 'commit' | 'release', reservationId: string) {
    // Stands in for the job's lifecycle events, which settle what the gateway leaves held.
    const settler = createClient(KeyService, keyService.address, testServiceClientOptions('key-service'));
    try {
      return settle === 'commit'
        ? await settler.commitSpend({ reservationId, chargedWei: { decimal: CHARGED_WEI.toString() } })
        : await settler.releaseSpend({ reservationId });
    } finally {
      closeClient(settler);
    }
  }

  async function completionStatus(minted: MintedKey, model: string): Promise<number> {
    const answer = await call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
      token: minted.key,
      body: { model, messages: hello },
    });
    return answer.status;
  }

  it('commits at the charged fee on success, releases a call never submitted, and refuses past the cap with 402', async () => {
    // Room for exactly one reserved fee at a time.
    const capped = await mintKey(gateway.baseUrl, { spendCapWei: String(FEE_WEI + CHARGED_WEI - 1n) });
    const client = sdk(capped.key);

    // The backend says no job was submitted: the reservation is given back and the next call fits.
    await expect(client.chat.completions.create({ model: 'no-worker', messages: hello })).rejects.toThrow();
    expect((await listedKey(gateway.baseUrl, capped)).spentWei).toBe('0');

    await client.chat.completions.create({ model: 'echo:1b', messages: hello });
    expect((await listedKey(gateway.baseUrl, capped)).spentWei).toBe(String(CHARGED_WEI));

    const refused = await client.chat.completions
      .create({ model: 'echo:1b', messages: hello })
      .catch((caught: unknown) => caught);
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(402);
    expect((refused as APIError).code).toBe('spend_cap_exceeded');
    expect((refused as APIError).error).toMatchObject({ spend_cap_wei: String(FEE_WEI + CHARGED_WEI - 1n) });
    await waitFor(
      async () => (await listedKey(gateway.baseUrl, capped)).limitHits.spendCap === 1 || undefined,
      { what: 'the spend cap refusal to be counted' },
    );
  });

  it.each(['fail-after', 'fail-before'])(
    'keeps the fee held when the job may have been submitted (%s) until its lifecycle settles it',
    async (model) => {
      const capped = await mintKey(gateway.baseUrl, { spendCapWei: String(FEE_WEI) });
      expect(await completionStatus(capped, model)).toBeGreaterThanOrEqual(400);
      const failed = backend.requests.at(-1);
      expect(failed?.model).toBe(model);
      expect(await completionStatus(capped, 'echo:1b')).toBe(402);

      const released = await settleAsLifecycle('release', delegatePaymentOf(failed).reservationId);
      expect(released.state).toBe(SpendReservationState.RELEASED);
      expect(await completionStatus(capped, 'echo:1b')).toBe(200);
    },
  );

  it('gives the fee back when the backend says, after the client left, that no job was submitted', async () => {
    const capped = await mintKey(gateway.baseUrl, { spendCapWei: String(FEE_WEI) });
    const leaving = new AbortController();
    const abandoned = fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${capped.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'cancellable', messages: hello }),
      signal: leaving.signal,
    });
    await waitFor(() => backend.requests.find((request) => request.payment.keyId === capped.id), {
      what: 'the call to reach the backend',
    });
    leaving.abort();
    await expect(abandoned).rejects.toThrow();
    await waitFor(async () => (await completionStatus(capped, 'echo:1b')) === 200 || undefined, {
      what: 'the reservation of the call never submitted to be released',
    });
  });

  it('never gives the fee back when the client leaves after the call was handed to the backend', async () => {
    // The job is sent at once but `started` comes 300 ms later; the client leaves at 150 ms.
    const capped = await mintKey(gateway.baseUrl, { spendCapWei: String(FEE_WEI) });
    const leaving = new AbortController();
    const abandoned = fetch(`${gateway.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${capped.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'slow-start', messages: hello, stream: true }),
      signal: leaving.signal,
    });
    await waitFor(
      () =>
        backend.requests.find(
          (request) => request.model === 'slow-start' && request.payment.keyId === capped.id,
        ),
      {
        what: 'the call to reach the backend',
      },
    );
    setTimeout(() => leaving.abort(), 150);
    await expect(abandoned).rejects.toThrow();
    const handedOver = backend.requests.at(-1);
    await waitFor(() => backend.aborted.includes(handedOver?.callId ?? '') || undefined, {
      what: 'the gateway to notice the client left',
    });

    // The job runs and the wallet pays: a second call on a key capped at one fee is refused.
    expect(await completionStatus(capped, 'echo:1b')).toBe(402);
    // Its answer, settled by the lifecycle events, counts as spent.
    const committed = await settleAsLifecycle('commit', delegatePaymentOf(handedOver).reservationId);
    expect(committed.state).toBe(SpendReservationState.COMMITTED);
    expect((await listedKey(gateway.baseUrl, capped)).spentWei).toBe(String(CHARGED_WEI));
  });
});
