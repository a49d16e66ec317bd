import type { MessageInitShape } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AppError, createServiceGrpcServer } from '@svc/platform';
import type { GrpcServer } from '@svc/proto';
import {
  JobOrchestrator,
  type DescribeChainResponseSchema,
} from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { call } from './support/http.js';
import { silentLogger, startKeyService, type RunningKeyService } from './support/key-service.js';
import { createTestStore, type TestStore } from './support/test-store.js';

// `GET /api/chain` of a gateway run as in production, over a JobOrchestrator gRPC server that answers
// DescribeChain as a test sets it (the orchestrator's own tests describe a real chain).

const JOB_REGISTRY = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const DELEGATE = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const CHAIN_LIMIT = 3;

let described: MessageInitShape<typeof DescribeChainResponseSchema>;
let redis: TestStore;
let keyService: RunningKeyService;
let orchestrator: GrpcServer;
let gateway: RunningGateway;
let withoutCompletions: RunningGateway;

function notHere(): never {
  throw new AppError('internal', { message: 'not used by these tests' });
}

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  orchestrator = createServiceGrpcServer(silentLogger).add(JobOrchestrator, {
    async describeChain() {
      return described;
    },
    listModels: notHere,
    quoteFee: notHere,
    runCompletion: notHere,
  });
  const port = await orchestrator.listen('127.0.0.1:0');
  gateway = await startGateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    env: { ORCHESTRATOR_ADDRESS: `127.0.0.1:${port}`, SIGN_IN_RATE_LIMIT: String(CHAIN_LIMIT) },
  });
  withoutCompletions = await startGateway({ keyServiceAddress: keyService.address, store: redis.open() });
});

afterAll(async () => {
  await Promise.all([gateway?.close(), withoutCompletions?.close()]);
  await orchestrator?.shutdown(100);
  await keyService?.close();
  await redis?.cleanup();
});

/** A call from its own client address (TRUST_PROXY is loopback), so each test has its own rate window. */
let clients = 0;
function fromNewClient(): Record<string, string> {
  clients += 1;
  return { 'x-forwarded-for': `198.51.100.${clients}` };
}

describe('GET /api/chain', () => {
  it('names the chain id as a JSON number, JobRegistry and the delegate, public and never cached', async () => {
    described = { chainId: 31337n, jobRegistry: { hex: JOB_REGISTRY }, delegate: { hex: DELEGATE } };
    const answer = await call(gateway.baseUrl, 'GET', '/api/chain', { headers: fromNewClient() });
    expect(answer.status).toBe(200);
    expect(answer.text).toBe(
      JSON.stringify({ chainId: 31337, jobRegistry: JOB_REGISTRY, delegate: DELEGATE }),
    );
    expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(answer.headers.get('content-security-policy')).toBe("default-src 'none'; frame-ancestors 'none'");
    expect(answer.headers.get('x-ratelimit-limit')).toBe(String(CHAIN_LIMIT));
  });

  it('answers delegate null when the orchestrator has no service signer', async () => {
    described = { chainId: 31337n, jobRegistry: { hex: JOB_REGISTRY } };
    const answer = await call(gateway.baseUrl, 'GET', '/api/chain', { headers: fromNewClient() });
    expect([answer.status, answer.body]).toEqual([
      200,
      { chainId: 31337, jobRegistry: JOB_REGISTRY, delegate: null },
    ]);
  });

  it('refuses a chain id a JSON number cannot hold with 500 internal_error, never a rounded one', async () => {
    described = { chainId: 2n ** 53n, jobRegistry: { hex: JOB_REGISTRY }, delegate: { hex: DELEGATE } };
    const answer = await call(gateway.baseUrl, 'GET', '/api/chain', { headers: fromNewClient() });
    expect([answer.status, answer.body]).toEqual([
      500,
      { error: 'internal_error', message: 'The server failed to answer.' },
    ]);
  });

  it('answers 503 not_configured in the /api shape on a server without completions', async () => {
    const answer = await call(withoutCompletions.baseUrl, 'GET', '/api/chain');
    expect(answer.status).toBe(503);
    expect(answer.body).toEqual({
      error: 'not_configured',
      message: expect.stringMatching(/^Completions are off/),
    });
    expect(answer.headers.get('cache-control')).toBe('no-store');
  });

  it('limits each client address, apart from its sign-in budget', async () => {
    described = { chainId: 31337n, jobRegistry: { hex: JOB_REGISTRY }, delegate: { hex: DELEGATE } };
    const headers = fromNewClient();
    const answers = await Promise.all(
      Array.from({ length: CHAIN_LIMIT + 2 }, () => call(gateway.baseUrl, 'GET', '/api/chain', { headers })),
    );
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(CHAIN_LIMIT);
    const refused = answers.filter((answer) => answer.status === 429);
    expect(refused).toHaveLength(2);
    expect(refused[0]!.body).toEqual({ error: 'rate_limit_exceeded', message: expect.any(String) });
    expect(Number(refused[0]!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // The same address can still sign in, and another address still reads the chain.
    const challenge = await call(gateway.baseUrl, 'GET', `/api/auth/challenge?address=${DELEGATE}`, {
      headers,
    });
    expect(challenge.status).toBe(200);
    expect((await call(gateway.baseUrl, 'GET', '/api/chain', { headers: fromNewClient() })).status).toBe(200);
  });

  it('is GET only', async () => {
    const answer = await call(gateway.baseUrl, 'POST', '/api/chain', { headers: fromNewClient(), body: {} });
    expect(answer.status).toBe(404);
    expect(answer.body).toEqual({ error: 'not_found', message: 'No route POST /api/chain.' });
  });
});
