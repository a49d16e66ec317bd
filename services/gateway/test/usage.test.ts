import { randomUUID } from 'node:crypto';
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { UsageListJson } from '@svc/api';
import { EmbeddedEventBus, jobLifecycleTopic } from '@svc/platform';
import {
  JobLifecycleEventSchema,
  JobLifecycleKind,
  PaymentPath,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { createTestDatabase, waitFor } from '@svc/testkit';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { call, randomWallet, signInOverHttp } from './support/http.js';
import { runKeyServiceOn, type RunningKeyService } from './support/key-service-target.js';
import { createTestStore, type TestStore } from './support/test-store.js';

// GET /api/usage over HTTP: the sign-in token only, query validation in the `/api` error shape, and the
// records the key-service wrote from lifecycle events.

let redis: TestStore;
let bus: EmbeddedEventBus;
let keyService: RunningKeyService;
let gateway: RunningGateway;
let base: string;

beforeAll(async () => {
  redis = createTestStore();
  bus = new EmbeddedEventBus();
  keyService = await runKeyServiceOn(redis.open(), await createTestDatabase({ prefix: 'gw' }), { bus });
  gateway = await startGateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    env: { KEY_ROUTES_RATE_LIMIT: '1000', SIGN_IN_RATE_LIMIT: '1000' },
  });
  base = gateway.baseUrl;
});

afterAll(async () => {
  await gateway?.close();
  await keyService?.close();
  await bus?.close();
  await redis?.cleanup();
});

const TX = `0x${'ab'.repeat(32)}`;
const WORKER = '0x00000000000000000000000000000000000000A1';

async function answeredCall(payer: string, keyId: string, calledAt: Date): Promise<string> {
  const reservationId = randomUUID();
  const common = {
    reservationId,
    requestId: randomUUID(),
    paymentPath: PaymentPath.DELEGATE,
    payer: { hex: payer },
    keyId,
    model: 'llama3.2:1b',
  };
  const job = { jobId: '12', sessionId: '3', attempt: 1, worker: { hex: WORKER } };
  for (const [kind, step] of [
    [JobLifecycleKind.REQUESTED, { occurredAt: timestampFromDate(calledAt) }],
    [JobLifecycleKind.SUBMITTED, { ...job, txHash: { hex: TX }, feeWei: { decimal: '1000' } }],
    [
      JobLifecycleKind.ANSWERED,
      { ...job, feeWei: { decimal: '1000' }, firstOutputMs: 120, durationMs: 450, droppedMessages: 1 },
    ],
  ] as const)
    await bus.publish(
      jobLifecycleTopic,
      create(JobLifecycleEventSchema, { eventId: randomUUID(), kind, ...common, ...step }),
    );
  return reservationId;
}

describe('GET /api/usage', () => {
  it('lists the wallet calls with every field, newest first, paged, with a summary on the first page', async () => {
    const wallet = randomWallet();
    const { token } = await signInOverHttp(base, wallet);
    const minted = await call(base, 'POST', '/api/api-keys', { token, body: { name: 'usage' } });
    const keyId = (minted.body as { id: string }).id;
    const older = await answeredCall(wallet.address, keyId, new Date('2026-11-20T10:00:00.000Z'));
    const newer = await answeredCall(wallet.address, keyId, new Date('2026-11-21T10:00:00.000Z'));
    // Another wallet's call is not listed.
    await answeredCall(randomWallet().address, randomUUID(), new Date('2026-11-21T11:00:00.000Z'));

    const listed = await waitFor(
      async () => {
        const answer = await call(base, 'GET', '/api/usage?limit=1', { token });
        const body = answer.body as UsageListJson;
        return answer.status === 200 &&
          body.summary?.outcomes[0]?.calls === 2 &&
          body.data.length === 1 &&
          body.data[0]?.totalTimeMs !== null
          ? answer
          : undefined;
      },
      { what: 'both calls in the usage' },
    );
    expect(listed.headers.get('cache-control')).toBe('no-store');
    const first = listed.body as UsageListJson;
    expect(first.data).toEqual([
      {
        id: newer,
        time: '2026-11-21T10:00:00.000Z',
        keyId,
        payer: wallet.address,
        payment: 'api_key',
        model: 'llama3.2:1b',
        outcome: 'answered',
        jobId: '12',
        sessionId: '3',
        txHash: TX,
        worker: WORKER,
        feeWei: '1000',
        droppedMessages: 1,
        timeToFirstTokenMs: 120,
        totalTimeMs: 450,
      },
    ]);
    expect(first.summary).toEqual({
      days: [
        { day: '2026-11-20', keyId, spentWei: '1000', calls: 1 },
        { day: '2026-11-21', keyId, spentWei: '1000', calls: 1 },
      ],
      outcomes: [{ outcome: 'answered', calls: 2 }],
    });
    expect(first.nextCursor).toEqual(expect.any(String));

    const second = await call(base, 'GET', `/api/usage?limit=1&cursor=${first.nextCursor}`, { token });
    expect(second.status).toBe(200);
    const page = second.body as UsageListJson;
    expect(page.data.map((r) => r.id)).toEqual([older]);
    expect(page.nextCursor).toBeNull();
    expect(page.summary).toBeNull();

    const ranged = await call(base, 'GET', '/api/usage?from=2026-11-21&to=2026-11-22T00:00:00Z', { token });
    expect((ranged.body as UsageListJson).data.map((r) => r.id)).toEqual([newer]);
    const byKey = await call(base, 'GET', `/api/usage?key=${randomUUID()}`, { token });
    expect((byKey.body as UsageListJson).data).toEqual([]);
  });

  it('takes the sign-in token only', async () => {
    const none = await call(base, 'GET', '/api/usage');
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ error: 'unauthorized', message: expect.any(String) });
    const apiKey = await call(base, 'GET', '/api/usage', { token: `svc_${'a'.repeat(43)}` });
    expect(apiKey.status).toBe(401);
    expect((apiKey.body as { error: string }).error).toBe('unauthorized');
    const forged = await call(base, 'GET', '/api/usage', { token: 'aaa.bbb.ccc' });
    expect(forged.status).toBe(401);
  });

  it.each([
    ['limit=0', 'limit'],
    ['limit=201', 'limit'],
    ['limit=ten', 'limit'],
    ['from=yesterday', 'from'],
    ['to=2026-13-45', 'to'],
    ['from=2026-11-22&to=2026-11-21', 'from'],
    ['limit=1&limit=2', 'limit'],
    ['key=', 'key'],
    ['cursor=%2F%2F', 'cursor'],
    ['cursor=bm90LW91cnM', 'cursor'],
  ])('refuses %s with 400 invalid_request naming the parameter', async (query, field) => {
    const { token } = await signInOverHttp(base, randomWallet());
    const answer = await call(base, 'GET', `/api/usage?${query}`, { token });
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ error: 'invalid_request', message: expect.stringContaining(field) });
  });
});
