import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Wallet } from 'ethers';
import OpenAI from 'openai';
import { freePort, startOtlpReceiver, waitFor, type OtlpReceiver, type ReceivedSpan } from '@svc/testkit';
import { paymentSignatureForAnswer } from '@svc/x402';
import { mintKey, signIn, Stack, type StackFile } from './support/stack.js';

// `npm start` with OTEL_EXPORTER_OTLP_ENDPOINT set exports its spans over OTLP to a collector (here one
// in this test's process): one streamed completion, made with the official openai client, is one trace
// from the gateway's request through the key-service and the job-orchestrator (and, through the event
// bus, the key-service's spend settlement), and no span carries the prompt, the API key or the sign-in
// token.

describe('tracing (npm start with OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  let receiver: OtlpReceiver;
  let stateDir: string;
  let stack: Stack | undefined;
  let base: string;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    stateDir = mkdtempSync(join(tmpdir(), 'svc-e2e-tracing-'));
    const port = await freePort();
    base = `http://localhost:${port}`;
    stack = await Stack.start({
      PORT: String(port),
      STATE_DIR: stateDir,
      DEVNET_PORT: '0',
      DEVNET_FILE: join(stateDir, 'devnet.json'),
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    });
  }, 120_000);

  /** The trace of the call sent with `requestId`, rooted at the gateway's span of it. */
  async function traceOf(requestId: string) {
    // The batch exporter sends within a few seconds.
    const root = await waitFor(
      () =>
        receiver
          .spans()
          .find((span) => span.attributes['svc.request_id'] === requestId && span.parentSpanId === ''),
      { what: "the gateway's span of the call", timeoutMs: 30_000 },
    );
    const inTrace = (): ReceivedSpan[] => receiver.spans().filter((span) => span.traceId === root.traceId);
    const named = (name: string) =>
      waitFor(() => inTrace().find((span) => span.name === name), { what: name, timeoutMs: 30_000 });
    return { root, inTrace, named };
  }

  /** One tree: every span of the trace hangs from a span of the trace, up to the gateway's. */
  function expectOneTree(spans: readonly ReceivedSpan[], root: ReceivedSpan): void {
    const spanIds = new Set(spans.map((span) => span.spanId));
    for (const span of spans) if (span !== root) expect(spanIds).toContain(span.parentSpanId);
    expect(spans.filter((span) => span.parentSpanId === '')).toEqual([root]);
  }

  afterAll(async () => {
    await stack?.stopWithin(30_000);
    await receiver?.close();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('makes one streamed completion one trace across the gateway, the key-service and the job-orchestrator', async () => {
    const stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
    const wallet = new Wallet(stackFile.demoWallet!.privateKey);
    const { token } = await signIn(base, wallet);
    const key = await mintKey(base, token, { name: 'traced' });
    const prompt = `a prompt no span may carry ${randomUUID()}`;
    const requestId = `traced-${randomUUID()}`;

    const client = new OpenAI({ apiKey: key, baseURL: `${base}/v1`, maxRetries: 0 });
    const stream = await client.chat.completions.create(
      { model: stackFile.models[0]!, messages: [{ role: 'user', content: prompt }], stream: true },
      { headers: { 'x-request-id': requestId } },
    );
    let answer = '';
    for await (const chunk of stream) answer += chunk.choices[0]?.delta?.content ?? '';
    expect(answer).toContain(prompt);

    const { root, named, inTrace } = await traceOf(requestId);
    expect(root).toMatchObject({
      service: 'all',
      name: 'POST /v1/chat/completions',
      kind: 2,
      attributes: { 'http.route': '/v1/chat/completions', 'http.response.status_code': 200 },
    });
    const runCompletion = await named('svc.orchestrator.v1.JobOrchestrator/RunCompletion');
    const reserveSpend = await named('svc.key.v1.KeyService/ReserveSpend');
    expect(runCompletion.parentSpanId).toBe(root.spanId);
    expect(reserveSpend.parentSpanId).toBe(root.spanId);
    expect(runCompletion.attributes['rpc.status_code']).toBe('OK');
    // The call's lifecycle events keep its trace through the orchestrator's outbox and the bus: the
    // key-service settles the spend in a span of this trace.
    const settlement = await named('process svc.job-lifecycle.v1');
    expect(settlement).toMatchObject({ kind: 5, parentSpanId: runCompletion.spanId });

    expectOneTree(inTrace(), root);

    // Nothing secret in any span the stack exported.
    const exported = JSON.stringify(receiver.spans());
    expect(exported).not.toContain(prompt);
    expect(exported).not.toContain(key);
    expect(exported).not.toMatch(/svc_[A-Za-z0-9_-]{8,}/);
    expect(exported).not.toContain(token);
    expect(exported).not.toMatch(/bearer /i);
  }, 120_000);

  it('makes a streamed call paid per call (x402) one trace through the payment-settler too', async () => {
    const stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
    // The demo wallet has a prepaid balance, all a per-call payment debits.
    const payer = new Wallet(stackFile.demoWallet!.privateKey);
    const prompt = `a paid prompt no span may carry ${randomUUID()}`;
    const requestId = `traced-x402-${randomUUID()}`;
    const call = (headers: Record<string, string>) =>
      fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({
          model: stackFile.models[0]!,
          messages: [{ role: 'user', content: prompt }],
          stream: true,
        }),
      });
    const required = await call({});
    expect(required.status).toBe(402);
    const signature = await paymentSignatureForAnswer(payer, required.headers);
    const streamed = await call({ 'payment-signature': signature, 'x-request-id': requestId });
    expect(streamed.status).toBe(200);
    expect(await streamed.text()).toContain('data: [DONE]');

    const { root: paidRoot, inTrace, named } = await traceOf(requestId);
    const verify = await named('svc.payment.v1.PaymentSettler/VerifyPayment');
    const runCompletion = await named('svc.orchestrator.v1.JobOrchestrator/RunCompletion');
    const settle = await named('svc.payment.v1.PaymentSettler/SettlePayment');
    expect(verify.parentSpanId).toBe(paidRoot.spanId);
    expect(runCompletion.parentSpanId).toBe(paidRoot.spanId);
    // The orchestrator settles while it runs the call: its call to the settler is under RunCompletion.
    expect(settle.parentSpanId).toBe(runCompletion.spanId);
    expectOneTree(inTrace(), paidRoot);

    const exported = JSON.stringify(receiver.spans());
    expect(exported).not.toContain(prompt);
    expect(exported).not.toContain(signature);
  }, 120_000);

  it("continues a caller's traceparent: the gateway's span is its child, in its trace", async () => {
    const traceId = randomBytes(16).toString('hex');
    const parentSpanId = randomBytes(8).toString('hex');
    const requestId = `traced-parent-${randomUUID()}`;
    const address = Wallet.createRandom().address;
    const challenge = await fetch(`${base}/api/auth/challenge?address=${address}`, {
      headers: { traceparent: `00-${traceId}-${parentSpanId}-01`, 'x-request-id': requestId },
    });
    expect(challenge.status).toBe(200);

    const gatewaySpan = await waitFor(
      () => receiver.spans().find((span) => span.traceId === traceId && span.parentSpanId === parentSpanId),
      { what: "the gateway's span of the call", timeoutMs: 30_000 },
    );
    expect(gatewaySpan).toMatchObject({
      name: 'GET /api/auth/challenge',
      kind: 2,
      attributes: { 'svc.request_id': requestId },
    });
    const createChallenge = await waitFor(
      () =>
        receiver
          .spans()
          .find((span) => span.traceId === traceId && span.name === 'svc.key.v1.KeyService/CreateChallenge'),
      { what: 'the key-service span of the call', timeoutMs: 30_000 },
    );
    expect(createChallenge.parentSpanId).toBe(gatewaySpan.spanId);
  }, 60_000);
});
