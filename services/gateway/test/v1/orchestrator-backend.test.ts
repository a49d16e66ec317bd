import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AppError, createServiceGrpcServer } from '@svc/platform';
import type { GrpcServer } from '@svc/proto';
import {
  JobOrchestrator,
  type RunCompletionRequest,
} from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { waitFor } from '@svc/testkit';
import OpenAI, { APIError } from 'openai';
import { call } from '../support/http.js';
import { silentLogger, startKeyService, type RunningKeyService } from '../support/key-service.js';
import { startGateway, type RunningGateway } from '../support/gateway.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { listedKey, mintKey } from './support/keys.js';

// The gateway as the runner runs it, pointed by ORCHESTRATOR_ADDRESS at a JobOrchestrator gRPC server
// scripted by model name (the orchestrator's own tests run the real one against workers on anvil).

const FEE = 1_000n;
const CHARGED = 900n;
const SERVICE = {
  jobId: '42',
  sessionId: '7',
  txHash: { hex: `0x${'ab'.repeat(32)}` },
  worker: { hex: `0x${'11'.repeat(20)}` },
};
const RETRIED_SERVICE = { ...SERVICE, jobId: '43', sessionId: '8', droppedMessages: 1 };
const DELEGATE_OPTION = {
  scheme: {
    case: 'delegate' as const,
    value: {
      chainId: 31337n,
      payer: { hex: `0x${'22'.repeat(20)}` },
      delegate: { hex: `0x${'33'.repeat(20)}` },
      instruction: {
        contract: { hex: `0x${'44'.repeat(20)}` },
        function: 'depositAndAuthorize(address)',
        args: [`0x${'33'.repeat(20)}`],
        minimumValueWei: { decimal: '1000' },
      },
      transaction: {
        to: { hex: `0x${'44'.repeat(20)}` },
        data: '0xabcdef',
        value: { decimal: '1000' },
        chainId: 31337n,
      },
    },
  },
};

const PREPAID_DEBIT_OPTION = {
  scheme: {
    case: 'prepaidDebit' as const,
    value: {
      scheme: 'prepaid-debit',
      network: 'eip155:31337',
      amount: { decimal: '1000' },
      asset: { hex: `0x${'44'.repeat(20)}` },
      payTo: { hex: `0x${'55'.repeat(20)}` },
      maxTimeoutSeconds: 120,
      extra: { name: 'JobRegistry', version: '1', facilitatorAddress: { hex: `0x${'66'.repeat(20)}` } },
    },
  },
};

let redis: TestStore;
let keyService: RunningKeyService;
let orchestrator: GrpcServer;
let gateway: RunningGateway;
let orchestratorAddress: string;
const received: RunCompletionRequest[] = [];
const cancelled: string[] = [];

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  orchestrator = createServiceGrpcServer(silentLogger).add(JobOrchestrator, {
    async listModels() {
      return { models: [{ id: 'echo:1b' }, { id: 'llama3.2:1b' }] };
    },
    async describeChain() {
      return { chainId: 31337n, jobRegistry: { hex: `0x${'44'.repeat(20)}` } };
    },
    async quoteFee({ model }) {
      if (model === 'missing') throw new AppError('model_not_found');
      return { feeWei: { decimal: FEE.toString() } };
    },
    async *runCompletion(request, context) {
      received.push(request);
      const text = `echo: ${request.messages.at(-1)?.content ?? ''}`;
      switch (request.model) {
        case 'no-delegate':
        case 'no-delegate-or-debit':
          yield {
            event: {
              case: 'failed',
              value: {
                error: {
                  code: 'delegate_not_authorized',
                  message: 'Authorize the signer.',
                  accepts:
                    request.model === 'no-delegate'
                      ? [DELEGATE_OPTION]
                      : [DELEGATE_OPTION, PREPAID_DEBIT_OPTION],
                },
                jobSubmitted: false,
              },
            },
          };
          return;
        case 'busy':
          yield {
            event: {
              case: 'failed',
              value: {
                error: {
                  code: 'session_open_limit_exceeded',
                  message: 'Too many sessions.',
                  retryAfterSeconds: 7,
                },
                jobSubmitted: false,
              },
            },
          };
          return;
        case 'hang':
          yield {
            event: { case: 'started', value: { service: SERVICE, feeWei: { decimal: FEE.toString() } } },
          };
          await new Promise((resolve) => context.signal.addEventListener('abort', resolve, { once: true }));
          cancelled.push(request.requestId);
          return;
        default:
          yield {
            event: { case: 'retrying', value: { jobId: '42', failedAttempt: 1, reasonCode: 'job_failed' } },
          };
          yield {
            event: {
              case: 'started',
              value: { service: RETRIED_SERVICE, feeWei: { decimal: FEE.toString() } },
            },
          };
          if (request.stream)
            for (const piece of [text.slice(0, 4), text.slice(4)])
              yield { event: { case: 'delta', value: { text: piece } } };
          yield {
            event: {
              case: 'completed',
              value: { text, service: RETRIED_SERVICE, chargedWei: { decimal: CHARGED.toString() } },
            },
          };
      }
    },
  });
  const port = await orchestrator.listen('127.0.0.1:0');
  orchestratorAddress = `127.0.0.1:${port}`;
  gateway = await startGateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    env: { ORCHESTRATOR_ADDRESS: orchestratorAddress, V1_LIMIT_HIT_FLUSH_INTERVAL: '100ms' },
  });
});

afterAll(async () => {
  await gateway?.close();
  await orchestrator?.shutdown(100);
  await keyService?.close();
  await redis?.cleanup();
});

function sdk(apiKey: string): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${gateway.baseUrl}/v1`, maxRetries: 0 });
}

const hello = [{ role: 'user' as const, content: 'hello' }];

describe('the gateway over the job-orchestrator', () => {
  it("lists the orchestrator's models", async () => {
    const minted = await mintKey(gateway.baseUrl);
    const ids = [];
    for await (const model of sdk(minted.key).models.list()) ids.push(model.id);
    expect(ids).toEqual(['echo:1b', 'llama3.2:1b']);
  });

  it('streams an answer whose x-service names the job that answered after a retry, and commits the charged fee', async () => {
    const minted = await mintKey(gateway.baseUrl);
    const { data: stream, response } = await sdk(minted.key)
      .chat.completions.create({ model: 'echo:1b', messages: hello, stream: true })
      .withResponse();
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? '';
    expect(text).toBe('echo: hello');
    expect(JSON.parse(response.headers.get('x-service') ?? '{}')).toMatchObject({
      job_id: '43',
      session_id: '8',
      dropped_messages: 1,
    });
    const sent = received.at(-1);
    expect(sent?.payment.case).toBe('delegate');
    expect(sent?.payment.value).toMatchObject({ keyId: minted.id, maxFeeWei: { decimal: FEE.toString() } });
    expect(sent?.messages).toEqual([expect.objectContaining({ content: 'hello' })]);
    expect((await listedKey(gateway.baseUrl, minted)).spentWei).toBe(CHARGED.toString());
  });

  it('answers a non-streamed call with the committed answer', async () => {
    const minted = await mintKey(gateway.baseUrl);
    const completion = await sdk(minted.key).chat.completions.create({ model: 'echo:1b', messages: hello });
    expect(completion.choices[0]?.message.content).toBe('echo: hello');
    expect(received.at(-1)?.stream).toBe(false);
  });

  it('answers 402 delegate_not_authorized with the ready-to-send transaction in error.accepts, and gives the fee back', async () => {
    const minted = await mintKey(gateway.baseUrl, { spendCapWei: FEE.toString() });
    const refused = await call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
      token: minted.key,
      body: { model: 'no-delegate', messages: hello },
    });
    expect(refused.status).toBe(402);
    expect(refused.body).toMatchObject({
      error: {
        code: 'delegate_not_authorized',
        message: 'Authorize the signer.',
        accepts: [
          {
            scheme: 'delegate',
            chain_id: 31337,
            payer: `0x${'22'.repeat(20)}`,
            delegate: `0x${'33'.repeat(20)}`,
            instruction: { function: 'depositAndAuthorize(address)', minimum_value_wei: '1000' },
            transaction: { to: `0x${'44'.repeat(20)}`, data: '0xabcdef', value: '1000', chainId: 31337 },
          },
        ],
      },
    });
    // Not submitted: the reservation came back, so a key capped at one fee can still call.
    const answered = await call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
      token: minted.key,
      body: { model: 'echo:1b', messages: hello },
    });
    expect(answered.status).toBe(200);
  });

  it("renders an orchestrator's prepaid-debit entry of accepts in the x402 JSON shape", async () => {
    const minted = await mintKey(gateway.baseUrl);
    const refused = await call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
      token: minted.key,
      body: { model: 'no-delegate-or-debit', messages: hello },
    });
    expect(refused.status).toBe(402);
    const { accepts } = (refused.body as { error: { accepts: unknown[] } }).error;
    expect(accepts).toHaveLength(2);
    expect(accepts[0]).toMatchObject({ scheme: 'delegate' });
    expect(accepts[1]).toEqual({
      scheme: 'prepaid-debit',
      network: 'eip155:31337',
      amount: '1000',
      asset: `0x${'44'.repeat(20)}`,
      payTo: `0x${'55'.repeat(20)}`,
      maxTimeoutSeconds: 120,
      extra: { name: 'JobRegistry', version: '1', facilitatorAddress: `0x${'66'.repeat(20)}` },
    });
  });

  it('answers 429 session_open_limit_exceeded with retry-after, counted in limitHits.sessionOpens', async () => {
    const minted = await mintKey(gateway.baseUrl);
    const refused = await sdk(minted.key)
      .chat.completions.create({ model: 'busy', messages: hello })
      .catch((caught: unknown) => caught);
    expect(refused).toBeInstanceOf(APIError);
    expect((refused as APIError).status).toBe(429);
    expect((refused as APIError).code).toBe('session_open_limit_exceeded');
    expect((refused as APIError).headers?.get('retry-after')).toBe('7');
    await waitFor(
      async () => (await listedKey(gateway.baseUrl, minted)).limitHits.sessionOpens === 1 || undefined,
      {
        what: 'the session-open refusal to be counted',
      },
    );
  });

  it("answers 404 model_not_found from the orchestrator's quote", async () => {
    const minted = await mintKey(gateway.baseUrl);
    const refused = await sdk(minted.key)
      .chat.completions.create({ model: 'missing', messages: hello })
      .catch((caught: unknown) => caught);
    expect((refused as APIError).status).toBe(404);
    expect((refused as APIError).code).toBe('model_not_found');
  });

  it('cancels the orchestrator call when the client leaves', async () => {
    const minted = await mintKey(gateway.baseUrl);
    const stream = await sdk(minted.key).chat.completions.create({
      model: 'hang',
      messages: hello,
      stream: true,
    });
    const callId = received.at(-1)?.requestId ?? '';
    await sleep(50);
    stream.controller.abort();
    await waitFor(() => cancelled.includes(callId) || undefined, {
      what: 'the orchestrator to see the call cancelled',
    });
  });

  it('lets a stopping gateway cut a stream still running once its shutdown grace passed', async () => {
    const stopping = await startGateway({
      keyServiceAddress: keyService.address,
      store: redis.open(),
      env: { ORCHESTRATOR_ADDRESS: orchestratorAddress, HTTP_SHUTDOWN_GRACE: '300ms' },
    });
    const minted = await mintKey(stopping.baseUrl);
    const stream = await new OpenAI({
      apiKey: minted.key,
      baseURL: `${stopping.baseUrl}/v1`,
      maxRetries: 0,
    }).chat.completions.create({ model: 'hang', messages: hello, stream: true });
    const callId = received.at(-1)?.requestId ?? '';
    const reading = (async () => {
      for await (const _chunk of stream);
    })().catch(() => undefined);
    const started = Date.now();
    await stopping.close();
    expect(Date.now() - started).toBeLessThan(5_000);
    await reading;
    await waitFor(() => cancelled.includes(callId) || undefined, { what: 'the cut call to be cancelled' });
  });
});
