import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AppError, createServiceGrpcServer } from '@svc/platform';
import { closeClient, createClient, type GrpcServer } from '@svc/proto';
import {
  JobOrchestrator,
  type RunCompletionRequest,
} from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import {
  PaymentRefusalCode,
  PaymentReservationState,
  PaymentSettler,
  type VerifyPaymentRequest,
} from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { waitFor } from '@svc/testkit';
import { paymentRequiredOf, paymentResponseOf } from '@svc/x402';
import { SettlerPayments } from '../../src/v1/per-call/settler-payments.js';
import { call, type HttpAnswer } from '../support/http.js';
import { silentLogger, startKeyService, type RunningKeyService } from '../support/key-service.js';
import { startGateway, type RunningGateway } from '../support/gateway.js';
import { createTestStore, type TestStore } from '../support/test-store.js';

// The gateway as the runner runs it, pointed by SETTLER_ADDRESS and ORCHESTRATOR_ADDRESS at gRPC servers
// scripted by payment and model: the settler adapter's conversions, and the prepaid-debit payment the
// orchestrator is handed.

const FEE = 1_000n;
const PAYER = `0x${'aB'.repeat(20)}`;
const TX_HASH = `0x${'cd'.repeat(32)}`;
const REQUIREMENTS_MESSAGE = {
  scheme: 'prepaid-debit',
  network: 'eip155:31337',
  amount: { decimal: FEE.toString() },
  asset: { hex: `0x${'44'.repeat(20)}` },
  payTo: { hex: `0x${'55'.repeat(20)}` },
  maxTimeoutSeconds: 120,
  extra: { name: 'JobRegistry', version: '1', facilitatorAddress: { hex: `0x${'66'.repeat(20)}` } },
};
/** REQUIREMENTS_MESSAGE in the x402 JSON shape a payment echoes verbatim. */
const REQUIREMENTS_JSON = {
  scheme: 'prepaid-debit',
  network: 'eip155:31337',
  amount: '1000',
  asset: `0x${'44'.repeat(20)}`,
  payTo: `0x${'55'.repeat(20)}`,
  maxTimeoutSeconds: 120,
  extra: { name: 'JobRegistry', version: '1', facilitatorAddress: `0x${'66'.repeat(20)}` },
};

let redis: TestStore;
let keyService: RunningKeyService;
let settler: GrpcServer;
let orchestrator: GrpcServer;
let gateway: RunningGateway;
const verifications: VerifyPaymentRequest[] = [];
const releases: string[] = [];
const runs: RunCompletionRequest[] = [];
let reservations = 0;

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  settler = createServiceGrpcServer(silentLogger).add(PaymentSettler, {
    async getRequirements({ model, resourceUrl }) {
      if (model === 'missing') throw new AppError('model_not_found');
      return {
        x402Version: 2,
        resource: { url: resourceUrl, description: 'A chat completion', mimeType: 'application/json' },
        requirements: REQUIREMENTS_MESSAGE,
      };
    },
    async verifyPayment(request) {
      verifications.push(request);
      switch (request.paymentSignature) {
        case 'pay:nonce-used':
          return {
            outcome: {
              case: 'refused',
              value: {
                code: PaymentRefusalCode.NONCE_USED,
                message: 'That nonce is spent.',
                payer: { hex: PAYER },
                currentRequirements: REQUIREMENTS_MESSAGE,
              },
            },
          };
        case 'pay:chain-down':
          throw new AppError('unexpected_verify_error', { message: 'The chain could not be read.' });
        default:
          reservations += 1;
          return {
            outcome: {
              case: 'verified',
              value: {
                reservationId: `reservation-${reservations}`,
                payer: { hex: PAYER },
                nonce: { hex: `0x${'01'.repeat(32)}` },
                amountWei: { decimal: FEE.toString() },
                maxAmountWei: { decimal: FEE.toString() },
                network: 'eip155:31337',
              },
            },
          };
      }
    },
    async settlePayment() {
      throw new AppError('internal', { message: 'the gateway never settles' });
    },
    async releasePayment({ reservationId }) {
      releases.push(reservationId);
      return { state: PaymentReservationState.RELEASED };
    },
  });
  orchestrator = createServiceGrpcServer(silentLogger).add(JobOrchestrator, {
    async listModels() {
      return { models: [{ id: 'echo:1b' }] };
    },
    async describeChain() {
      return { chainId: 31337n, jobRegistry: { hex: `0x${'44'.repeat(20)}` } };
    },
    async quoteFee() {
      return { feeWei: { decimal: FEE.toString() } };
    },
    async *runCompletion(request) {
      runs.push(request);
      if (request.model === 'no-worker') {
        yield {
          event: {
            case: 'failed',
            value: { error: { code: 'no_worker_available', message: 'No worker.' }, jobSubmitted: false },
          },
        };
        return;
      }
      const service = { jobId: '9', sessionId: '3', txHash: { hex: TX_HASH }, worker: { hex: PAYER } };
      yield { event: { case: 'started', value: { service, feeWei: { decimal: FEE.toString() } } } };
      yield {
        event: { case: 'completed', value: { text: 'paid', service, chargedWei: { decimal: '900' } } },
      };
    },
  });
  const [settlerPort, orchestratorPort] = await Promise.all([
    settler.listen('127.0.0.1:0'),
    orchestrator.listen('127.0.0.1:0'),
  ]);
  gateway = await startGateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    env: {
      SETTLER_ADDRESS: `127.0.0.1:${settlerPort}`,
      ORCHESTRATOR_ADDRESS: `127.0.0.1:${orchestratorPort}`,
    },
  });
});

afterAll(async () => {
  await gateway?.close();
  await Promise.all([settler?.shutdown(100), orchestrator?.shutdown(100)]);
  await keyService?.close();
  await redis?.cleanup();
});

function completion(model: string, paymentSignature?: string): Promise<HttpAnswer> {
  return call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
    body: { model, messages: [{ role: 'user', content: 'hello' }] },
    headers: paymentSignature === undefined ? {} : { 'payment-signature': paymentSignature },
  });
}

describe('the gateway over the payment-settler', () => {
  it("offers the settler's requirements in the x402 JSON shape, for the URL the call was made to", async () => {
    const answer = await completion('echo:1b');
    expect(answer.status).toBe(402);
    expect((answer.body as { error: { accepts: unknown } }).error.accepts).toEqual([REQUIREMENTS_JSON]);
    expect(paymentRequiredOf(answer.headers)).toEqual({
      x402Version: 2,
      error: 'payment_required',
      // No PUBLIC_URL: the request's own origin names the resource.
      resource: {
        url: `${gateway.baseUrl}/v1/chat/completions`,
        description: 'A chat completion',
        mimeType: 'application/json',
      },
      accepts: [REQUIREMENTS_JSON],
    });
  });

  it('answers 404 model_not_found when the settler knows no such model', async () => {
    const answer = await completion('missing');
    expect(answer.status).toBe(404);
    expect((answer.body as { error: { code: string } }).error.code).toBe('model_not_found');
  });

  it("verifies with the call's model, URL, id and the reservation TTL, and hands the orchestrator the prepaid-debit payment", async () => {
    const answer = await completion('echo:1b', 'pay:good');
    expect(answer.status).toBe(200);
    const verified = verifications.at(-1);
    const ran = runs.at(-1);
    expect(verified).toMatchObject({
      paymentSignature: 'pay:good',
      model: 'echo:1b',
      resourceUrl: `${gateway.baseUrl}/v1/chat/completions`,
      requestId: ran?.requestId,
      // V1_PAYMENT_RESERVATION_TTL's default, 5 minutes.
      reservationTtl: { seconds: 300n },
    });
    expect(ran?.payment.case).toBe('prepaidDebit');
    expect(ran?.payment.value).toMatchObject({
      paymentReservationId: `reservation-${reservations}`,
      payer: { hex: PAYER },
      amountWei: { decimal: FEE.toString() },
      keyId: '',
      spendReservationId: '',
    });
    expect(paymentResponseOf(answer.headers)).toEqual({
      success: true,
      transaction: TX_HASH,
      network: 'eip155:31337',
      payer: PAYER,
      amount: FEE.toString(),
    });
  });

  it('maps a refusal to its public code, with the payer and the current requirements', async () => {
    const answer = await completion('echo:1b', 'pay:nonce-used');
    expect(answer.status).toBe(402);
    expect(answer.body).toMatchObject({
      error: {
        code: 'invalid_prepaid_debit_payload_nonce_used',
        message: 'That nonce is spent.',
        accepts: [REQUIREMENTS_JSON],
      },
    });
    expect(paymentResponseOf(answer.headers)).toMatchObject({
      success: false,
      errorReason: 'invalid_prepaid_debit_payload_nonce_used',
      payer: PAYER,
      network: 'eip155:31337',
    });
  });

  it('answers 502 unexpected_verify_error when the settler cannot read the chain', async () => {
    const answer = await completion('echo:1b', 'pay:chain-down');
    expect(answer.status).toBe(502);
    expect((answer.body as { error: { code: string } }).error.code).toBe('unexpected_verify_error');
  });

  it('releases the reservation of a call the orchestrator never submitted', async () => {
    const answer = await completion('no-worker', 'pay:good');
    expect(answer.status).toBe(503);
    const reservationId = `reservation-${reservations}`;
    await waitFor(() => releases.includes(reservationId) || undefined, {
      what: 'the settler to hear the release',
    });
  });

  it('answers unexpected_verify_error when the settler cannot be reached at all', async () => {
    const unreachable = createClient(PaymentSettler, '127.0.0.1:1');
    try {
      const payments = new SettlerPayments(unreachable, 60_000);
      const verifying = payments.verify('payload', 'echo:1b', 'http://gateway.test/v1/chat/completions', 'r');
      await expect(verifying).rejects.toMatchObject({ code: 'unexpected_verify_error' });
      await expect(payments.requirements('echo:1b', 'http://gateway.test')).rejects.toMatchObject({
        code: 'unexpected_verify_error',
      });
    } finally {
      closeClient(unreachable);
    }
  });
});
