import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AppError, PAYMENT_REFUSAL_CODES, type PaymentRefusalCode } from '@svc/platform';
import { waitFor } from '@svc/testkit';
import {
  encodeHeader,
  paymentRequiredOf,
  paymentResponseOf,
  paymentSignatureFor,
  signPayment,
  type PaymentOptions,
} from '@svc/x402';
import type { HDNodeWallet } from 'ethers';
import OpenAI from 'openai';
import { call, randomWallet, type HttpAnswer } from '../support/http.js';
import { startKeyService, type RunningKeyService } from '../support/key-service.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { listedKey, mintKey } from './support/keys.js';
import {
  CHARGED_WEI,
  FEE_WEI,
  JOB,
  prepaidDebitPaymentOf,
  ScriptedBackend,
} from './support/scripted-backend.js';
import { REQUIREMENTS, RESOURCE_DESCRIPTION, ScriptedSettler } from './support/scripted-settler.js';
import { startV1Gateway, type V1Gateway } from './support/v1-gateway.js';

// The gateway's side of per-call payments (docs/protocol.md, Per-call payment), against a scripted settler
// and backend: statuses, the x402 headers, the per-payer limits, and when a payment's nonce is given back.

const PAYER_RATE_LIMIT = 3;
const PUBLIC_URL = 'https://api.example.test/';
const RESOURCE_URL = 'https://api.example.test/v1/chat/completions';

/** The status of each refusal, as the protocol's table of checks states it. */
const REFUSAL_STATUS: Record<PaymentRefusalCode, 400 | 402> = {
  invalid_payload: 400,
  invalid_x402_version: 400,
  unsupported_scheme: 400,
  invalid_network: 400,
  invalid_payment_requirements: 400,
  invalid_prepaid_debit_payload_expired: 402,
  invalid_prepaid_debit_payload_facilitator_mismatch: 402,
  invalid_prepaid_debit_payload_recipient_mismatch: 402,
  invalid_prepaid_debit_facilitator_not_authorized: 402,
  invalid_prepaid_debit_payload_nonce_used: 402,
  invalid_prepaid_debit_payload_signature: 402,
  invalid_prepaid_debit_payload_over_cap: 402,
  insufficient_funds: 402,
  invalid_transaction_state: 402,
};

const DELEGATE_ENTRY = {
  scheme: 'delegate',
  chain_id: 31337,
  payer: `0x${'22'.repeat(20)}`,
  delegate: `0x${'33'.repeat(20)}`,
};

let redis: TestStore;
let keyService: RunningKeyService;
let backend: ScriptedBackend;
let settler: ScriptedSettler;
/** Takes per-call payments. */
let paid: V1Gateway;
/** Takes none. */
let unpaid: V1Gateway;

const hello = [{ role: 'user' as const, content: 'hello' }];

function pay(payer: HDNodeWallet, options: PaymentOptions = {}): Promise<string> {
  return paymentSignatureFor(payer, REQUIREMENTS, options);
}

function completion(
  gateway: V1Gateway,
  body: Record<string, unknown>,
  auth: { paymentSignature?: string; apiKey?: string } = {},
): Promise<HttpAnswer> {
  return call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
    body: { messages: hello, ...body },
    ...(auth.apiKey === undefined ? {} : { token: auth.apiKey }),
    headers: auth.paymentSignature === undefined ? {} : { 'payment-signature': auth.paymentSignature },
  });
}

function errorOf(answer: HttpAnswer): Record<string, unknown> {
  return (answer.body as { error: Record<string, unknown> }).error;
}

function expectRefusedPayment(answer: HttpAnswer, code: string, payer: string): void {
  expect(paymentResponseOf(answer.headers)).toEqual({
    success: false,
    errorReason: code,
    transaction: '',
    network: REQUIREMENTS.network,
    payer,
  });
  expect(paymentRequiredOf(answer.headers)).toEqual({
    x402Version: 2,
    error: code,
    resource: { url: RESOURCE_URL, description: expect.any(String), mimeType: 'application/json' },
    accepts: [REQUIREMENTS],
  });
}

function requestsPaidBy(payer: HDNodeWallet) {
  return backend.requests.filter(
    (request) =>
      request.payment.case === 'prepaidDebit' &&
      request.payment.payer.toLowerCase() === payer.address.toLowerCase(),
  );
}

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  backend = new ScriptedBackend();
  settler = new ScriptedSettler();
  backend.scriptFailure('settle-refused', {
    error: () => new AppError('invalid_transaction_state', { message: 'The chain refused the settlement.' }),
    jobSubmitted: false,
  });
  backend.scriptFailure('funds-gone', {
    error: () => new AppError('insufficient_funds', { message: 'The balance went meanwhile.' }),
    jobSubmitted: false,
  });
  for (const code of ['delegate_not_authorized', 'insufficient_balance', 'allowance_exhausted'] as const)
    backend.scriptFailure(`refuse-${code}`, {
      error: () => new AppError(code, { fields: { accepts: [DELEGATE_ENTRY] } }),
      jobSubmitted: false,
    });
  paid = await startV1Gateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    completions: backend,
    settler,
    env: {
      V1_KEY_RATE_LIMIT: '1000',
      V1_PAYER_RATE_LIMIT: String(PAYER_RATE_LIMIT),
      V1_PAYER_CONCURRENCY_LIMIT: '1',
      PUBLIC_URL,
    },
  });
  unpaid = await startV1Gateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    completions: backend,
    env: { V1_KEY_RATE_LIMIT: '1000' },
  });
});

afterAll(async () => {
  backend?.releaseHeld();
  await Promise.all([paid?.close(), unpaid?.close()]);
  await keyService?.close();
  await redis?.cleanup();
});

describe('a call with neither an API key nor a payment', () => {
  it.each([
    [false, 'application/json'],
    [true, 'text/event-stream'],
  ])(
    'is answered 402 payment_required with the prepaid-debit entry in accepts and PAYMENT-REQUIRED (stream: %s)',
    async (stream, mimeType) => {
      const answer = await completion(paid, { model: 'echo:1b', stream });
      expect(answer.status).toBe(402);
      expect(answer.body).toEqual({
        error: {
          message: expect.any(String),
          type: 'payment_required',
          param: null,
          code: 'payment_required',
          accepts: [REQUIREMENTS],
        },
      });
      expect(paymentRequiredOf(answer.headers)).toEqual({
        x402Version: 2,
        error: 'payment_required',
        resource: { url: RESOURCE_URL, description: RESOURCE_DESCRIPTION, mimeType },
        accepts: [REQUIREMENTS],
      });
      expect(settler.requirementUrls.at(-1)).toBe(RESOURCE_URL);
      expect(answer.headers.get('payment-response')).toBeNull();
    },
  );

  it('is validated first (400, code null), and names an unknown model 404 model_not_found', async () => {
    const asked = settler.requirementUrls.length;
    const invalid = await completion(paid, { model: 'echo:1b', messages: [] });
    expect(invalid.status).toBe(400);
    expect(errorOf(invalid)).toMatchObject({ code: null, param: 'messages' });
    expect(settler.requirementUrls).toHaveLength(asked);

    const unknown = await completion(paid, { model: 'missing' });
    expect(unknown.status).toBe(404);
    expect(errorOf(unknown).code).toBe('model_not_found');
  });

  it('is answered 401 invalid_api_key by a server without per-call payments', async () => {
    const answer = await completion(unpaid, { model: 'echo:1b' });
    expect(answer.status).toBe(401);
    expect(errorOf(answer).code).toBe('invalid_api_key');
    expect(answer.headers.get('payment-required')).toBeNull();
  });

  it('is answered 401 invalid_api_key when the settler has no facilitator, so takes no payments', async () => {
    settler.takesNoPayments = true;
    try {
      const answer = await completion(paid, { model: 'echo:1b' });
      expect(answer.status).toBe(401);
      expect(errorOf(answer).code).toBe('invalid_api_key');
      expect(answer.headers.get('payment-required')).toBeNull();
    } finally {
      settler.takesNoPayments = false;
    }
  });
});

describe('PAYMENT-SIGNATURE on a server without per-call payments', () => {
  it('refuses in the protocol order: invalid_payload, invalid_x402_version, then unsupported_scheme', async () => {
    const signed = await pay(randomWallet());
    const foreignScheme = encodeHeader({ x402Version: 2, accepted: { scheme: 'exact' }, payload: {} });
    const cases: [string, string][] = [
      ['%%% not base64 %%%', 'invalid_payload'],
      [encodeHeader({ x402Version: 1, accepted: { scheme: 'exact' } }), 'invalid_x402_version'],
      [foreignScheme, 'unsupported_scheme'],
      [signed, 'unsupported_scheme'],
    ];
    for (const [paymentSignature, code] of cases) {
      // No key either: the payment is refused before the missing key.
      const answer = await completion(unpaid, { model: 'echo:1b' }, { paymentSignature });
      expect([answer.status, errorOf(answer).code]).toEqual([400, code]);
      expect(answer.headers.get('payment-required')).toBeNull();
    }
    expect(backend.requests.filter((request) => request.payment.case === 'prepaidDebit')).toEqual([]);
  });

  it('answers a field missing or ill-formed invalid_payload, and one present but not taken by its own code', async () => {
    const signed = await signPayment(randomWallet(), REQUIREMENTS);
    const { x402Version: _version, ...unversioned } = signed;
    const { scheme: _scheme, ...unnamed } = signed.accepted;
    const { network: _network, ...networkless } = signed.accepted;
    const cases: [string, string, string][] = [
      ['JSON that is no payment', Buffer.from('{"hello":1}', 'utf8').toString('base64'), 'invalid_payload'],
      ['no x402Version', encodeHeader(unversioned), 'invalid_payload'],
      ['x402Version "2"', encodeHeader({ ...signed, x402Version: '2' }), 'invalid_payload'],
      ['x402Version 1', encodeHeader({ ...signed, x402Version: 1 }), 'invalid_x402_version'],
      ['no accepted.scheme', encodeHeader({ ...signed, accepted: unnamed }), 'invalid_payload'],
      [
        'accepted.scheme 7',
        encodeHeader({ ...signed, accepted: { ...signed.accepted, scheme: 7 } }),
        'invalid_payload',
      ],
      [
        'accepted.scheme "exact"',
        encodeHeader({ ...signed, accepted: { ...signed.accepted, scheme: 'exact' } }),
        'unsupported_scheme',
      ],
      ['no accepted.network', encodeHeader({ ...signed, accepted: networkless }), 'invalid_payload'],
      [
        'another network',
        encodeHeader({ ...signed, accepted: { ...signed.accepted, network: 'eip155:1' } }),
        'unsupported_scheme',
      ],
    ];
    for (const [what, paymentSignature, code] of cases) {
      const answer = await completion(unpaid, { model: 'echo:1b' }, { paymentSignature });
      expect({ what, status: answer.status, code: errorOf(answer).code }).toEqual({
        what,
        status: 400,
        code,
      });
    }
  });
});

describe('a call paid per call', () => {
  it('answers 200 with PAYMENT-RESPONSE naming the settlement (the job transaction) and the fee', async () => {
    const payer = randomWallet();
    const client = new OpenAI({
      apiKey: 'unused',
      baseURL: `${paid.baseUrl}/v1`,
      maxRetries: 0,
      // The SDK sends a bearer token by default; a call paid per call carries none.
      defaultHeaders: { authorization: null },
    });
    const { data, response } = await client.chat.completions
      .create({ model: 'echo:1b', messages: hello }, { headers: { 'payment-signature': await pay(payer) } })
      .withResponse();
    expect(data.choices[0]?.message.content).toBe('echo: hello');
    expect(JSON.parse(response.headers.get('x-service')!)).toMatchObject({ tx_hash: JOB.txHash });
    expect(paymentResponseOf(response.headers)).toEqual({
      success: true,
      transaction: JOB.txHash,
      network: REQUIREMENTS.network,
      payer: payer.address,
      amount: FEE_WEI.toString(),
    });

    const [verified] = settler.verifiedFor(payer.address);
    expect(prepaidDebitPaymentOf(requestsPaidBy(payer)[0])).toEqual({
      case: 'prepaidDebit',
      paymentReservationId: verified?.reservationId,
      payer: payer.address,
      amountWei: FEE_WEI,
    });
    // Settled by the job, never given back.
    expect(settler.released).not.toContain(verified?.reservationId);
  });

  it('streams with PAYMENT-RESPONSE among the headers of the first chunk', async () => {
    const payer = randomWallet();
    const response = await fetch(`${paid.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'payment-signature': await pay(payer) },
      body: JSON.stringify({ model: 'echo:1b', messages: hello, stream: true }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(paymentResponseOf(response.headers)).toEqual({
      success: true,
      transaction: JOB.txHash,
      network: REQUIREMENTS.network,
      payer: payer.address,
      amount: FEE_WEI.toString(),
    });
    expect(response.headers.get('x-service')).not.toBeNull();
    expect((await response.text()).trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  it.each(PAYMENT_REFUSAL_CODES)(
    'answers the refusal %s with its status, PAYMENT-RESPONSE and PAYMENT-REQUIRED',
    async (code) => {
      const payer = randomWallet();
      settler.refuse(payer.address, code);
      const answer = await completion(paid, { model: 'echo:1b' }, { paymentSignature: await pay(payer) });
      expect(answer.status).toBe(REFUSAL_STATUS[code]);
      expect(errorOf(answer)).toMatchObject({ code, message: `Scripted refusal: ${code}.` });
      // `accepts` on the 402s only; the headers on every payment refusal.
      expect(errorOf(answer).accepts).toEqual(REFUSAL_STATUS[code] === 402 ? [REQUIREMENTS] : undefined);
      expectRefusedPayment(answer, code, payer.address);
      expect(requestsPaidBy(payer)).toEqual([]);
    },
  );

  it('names no payer in PAYMENT-RESPONSE when the payload could not be read', async () => {
    const answer = await completion(paid, { model: 'echo:1b' }, { paymentSignature: 'not-base64!' });
    expect(answer.status).toBe(400);
    expect(errorOf(answer).code).toBe('invalid_payload');
    expectRefusedPayment(answer, 'invalid_payload', '');
  });

  it('answers JSON that is no payment ({"hello":1}) 400 invalid_payload, not invalid_x402_version, with the payment headers', async () => {
    const signed = await signPayment(randomWallet(), REQUIREMENTS);
    const { x402Version: _version, ...unversioned } = signed;
    for (const paymentSignature of [
      Buffer.from('{"hello":1}', 'utf8').toString('base64'),
      encodeHeader(unversioned),
      encodeHeader({ ...signed, x402Version: null }),
    ]) {
      const answer = await completion(paid, { model: 'echo:1b' }, { paymentSignature });
      expect([answer.status, errorOf(answer).code]).toEqual([400, 'invalid_payload']);
      expectRefusedPayment(answer, 'invalid_payload', '');
    }
    const foreign = await completion(
      paid,
      { model: 'echo:1b' },
      { paymentSignature: encodeHeader({ ...signed, x402Version: 1 }) },
    );
    expect([foreign.status, errorOf(foreign).code]).toEqual([400, 'invalid_x402_version']);
    expectRefusedPayment(foreign, 'invalid_x402_version', '');
  });

  it('gives a payment failed before submission back, even when the backend says so after the client left', async () => {
    const payer = randomWallet();
    const refused = await completion(paid, { model: 'no-worker' }, { paymentSignature: await pay(payer) });
    expect(refused.status).toBe(503);
    expect(refused.headers.get('payment-response')).toBeNull();
    const [first] = settler.verifiedFor(payer.address);
    expect(settler.released).toContain(first?.reservationId);

    const leaving = new AbortController();
    const abandoned = fetch(`${paid.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'payment-signature': await pay(payer) },
      body: JSON.stringify({ model: 'cancellable', messages: hello }),
      signal: leaving.signal,
    });
    await waitFor(() => requestsPaidBy(payer).length === 2 || undefined, {
      what: 'the call to reach the backend',
    });
    const second = settler.verifiedFor(payer.address)[1];
    expect(settler.released).not.toContain(second?.reservationId);
    leaving.abort();
    await expect(abandoned).rejects.toThrow();
    await waitFor(() => settler.released.includes(second?.reservationId ?? '') || undefined, {
      what: 'the payment of the call never submitted to be released',
    });
  });

  it.each([
    ['settle-refused', 'invalid_transaction_state'],
    ['funds-gone', 'insufficient_funds'],
  ])(
    'answers a settlement the backend reports refused (%s) with the payment headers',
    async (model, code) => {
      const payer = randomWallet();
      const answer = await completion(paid, { model }, { paymentSignature: await pay(payer) });
      expect(answer.status).toBe(402);
      expect(errorOf(answer)).toMatchObject({ code, accepts: [REQUIREMENTS] });
      expectRefusedPayment(answer, code, payer.address);
      expect(settler.released).toContain(settler.verifiedFor(payer.address)[0]?.reservationId);
    },
  );

  it('still answers a settlement refusal when the current requirements cannot be read, without PAYMENT-REQUIRED', async () => {
    const payer = randomWallet();
    const paymentSignature = await pay(payer);
    settler.requirementsDown = true;
    try {
      const answer = await completion(paid, { model: 'settle-refused' }, { paymentSignature });
      expect(answer.status).toBe(402);
      expect(errorOf(answer).code).toBe('invalid_transaction_state');
      expect(paymentResponseOf(answer.headers)).toMatchObject({
        success: false,
        errorReason: 'invalid_transaction_state',
        payer: payer.address,
      });
      expect(answer.headers.get('payment-required')).toBeNull();
    } finally {
      settler.requirementsDown = false;
    }
  });
});

describe('per-payer limits of keyless calls', () => {
  it('refuses the call past the rate with 429 and retry-after, before the backend, and gives its payment back', async () => {
    const payer = randomWallet();
    for (let i = 0; i < PAYER_RATE_LIMIT; i += 1) {
      const answer = await completion(paid, { model: 'echo:1b' }, { paymentSignature: await pay(payer) });
      expect(answer.status).toBe(200);
    }
    const refused = await completion(paid, { model: 'echo:1b' }, { paymentSignature: await pay(payer) });
    expect(refused.status).toBe(429);
    expect(errorOf(refused).code).toBe('rate_limit_exceeded');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(requestsPaidBy(payer)).toHaveLength(PAYER_RATE_LIMIT);
    const verified = settler.verifiedFor(payer.address);
    expect(verified).toHaveLength(PAYER_RATE_LIMIT + 1);
    expect(settler.released.filter((id) => verified.some((payment) => payment.reservationId === id))).toEqual(
      [verified.at(-1)?.reservationId],
    );
  });

  it('lets one call of a payer run at once: of two in parallel exactly one is refused 429 and its payment given back', async () => {
    const payer = randomWallet();
    const signatures = [await pay(payer), await pay(payer)];
    const calls = signatures.map((paymentSignature) =>
      completion(paid, { model: 'hold' }, { paymentSignature }),
    );
    // The call holding the slot is held open by the backend, so the first answer is the refusal.
    const first = await Promise.race(calls);
    expect(first.status).toBe(429);
    expect(errorOf(first).code).toBe('concurrency_limit_exceeded');
    expect(Number(first.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    await waitFor(() => backend.holding.size === 1 || undefined, { what: 'the other call to be held' });

    // Another payer is not held back by this one.
    const other = await completion(
      paid,
      { model: 'echo:1b' },
      { paymentSignature: await pay(randomWallet()) },
    );
    expect(other.status).toBe(200);

    backend.releaseHeld();
    const answers = await Promise.all(calls);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 429]);
    const ran = prepaidDebitPaymentOf(requestsPaidBy(payer)[0]).paymentReservationId;
    const refusedPayment = settler
      .verifiedFor(payer.address)
      .find((payment) => payment.reservationId !== ran);
    expect(settler.released).toContain(refusedPayment?.reservationId);
    expect(settler.released).not.toContain(ran);

    // Its nonce was given back: the very same PAYMENT-SIGNATURE pays a later call.
    const refusedSignature = signatures[answers.findIndex((answer) => answer.status === 429)]!;
    const again = await completion(paid, { model: 'echo:1b' }, { paymentSignature: refusedSignature });
    expect(again.status).toBe(200);
  });
});

describe('an API key beside a payment', () => {
  it("refuses a payment whose payer is not the key's wallet with 400 invalid_payload, and gives it back", async () => {
    const minted = await mintKey(paid.baseUrl);
    const stranger = randomWallet();
    const answer = await completion(
      paid,
      { model: 'echo:1b' },
      { apiKey: minted.key, paymentSignature: await pay(stranger) },
    );
    expect(answer.status).toBe(400);
    expect(errorOf(answer)).toMatchObject({
      code: 'invalid_payload',
      message: expect.stringMatching(/key's wallet/),
    });
    expectRefusedPayment(answer, 'invalid_payload', stranger.address);
    expect(settler.released).toContain(settler.verifiedFor(stranger.address)[0]?.reservationId);
    expect(requestsPaidBy(stranger)).toEqual([]);
  });

  it("runs with the key's id and spend reservation, commits the spend, and skips the per-payer limits", async () => {
    const minted = await mintKey(paid.baseUrl);
    const answer = await completion(
      paid,
      { model: 'echo:1b' },
      { apiKey: minted.key, paymentSignature: await pay(minted.wallet) },
    );
    expect(answer.status).toBe(200);
    expect(paymentResponseOf(answer.headers)).toMatchObject({ success: true, payer: minted.wallet.address });
    expect(prepaidDebitPaymentOf(requestsPaidBy(minted.wallet)[0])).toEqual({
      case: 'prepaidDebit',
      paymentReservationId: settler.verifiedFor(minted.wallet.address)[0]?.reservationId,
      payer: minted.wallet.address,
      amountWei: FEE_WEI,
      keyId: minted.id,
      spendReservationId: expect.any(String),
    });
    expect((await listedKey(paid.baseUrl, minted)).spentWei).toBe(CHARGED_WEI.toString());

    // The key's limits hold the call, not the payer's (one in flight): two calls run at once.
    const held = [await pay(minted.wallet), await pay(minted.wallet)].map((paymentSignature) =>
      completion(paid, { model: 'hold' }, { apiKey: minted.key, paymentSignature }),
    );
    await waitFor(() => backend.holding.size === 2 || undefined, { what: 'both calls to be held' });
    backend.releaseHeld();
    expect((await Promise.all(held)).map((each) => each.status)).toEqual([200, 200]);
  });

  it("refuses past the key's spend cap with 402 spend_cap_exceeded and gives the payment back", async () => {
    const minted = await mintKey(paid.baseUrl, { spendCapWei: String(FEE_WEI - 1n) });
    const answer = await completion(
      paid,
      { model: 'echo:1b' },
      { apiKey: minted.key, paymentSignature: await pay(minted.wallet) },
    );
    expect(answer.status).toBe(402);
    expect(errorOf(answer).code).toBe('spend_cap_exceeded');
    expect(settler.released).toContain(settler.verifiedFor(minted.wallet.address)[0]?.reservationId);
    expect(requestsPaidBy(minted.wallet)).toEqual([]);
  });
});

describe('the delegate-path 402', () => {
  it.each(['delegate_not_authorized', 'insufficient_balance', 'allowance_exhausted'])(
    'offers the prepaid-debit entry after the delegate one on %s, with PAYMENT-REQUIRED, when the server takes per-call payments',
    async (code) => {
      const minted = await mintKey(paid.baseUrl);
      const withSettler = await completion(paid, { model: `refuse-${code}` }, { apiKey: minted.key });
      expect(withSettler.status).toBe(402);
      expect(errorOf(withSettler)).toMatchObject({ code, accepts: [DELEGATE_ENTRY, REQUIREMENTS] });
      expect(paymentRequiredOf(withSettler.headers)).toEqual({
        x402Version: 2,
        error: code,
        resource: { url: RESOURCE_URL, description: RESOURCE_DESCRIPTION, mimeType: 'application/json' },
        accepts: [REQUIREMENTS],
      });
      expect(withSettler.headers.get('payment-response')).toBeNull();

      const withoutSettler = await completion(unpaid, { model: `refuse-${code}` }, { apiKey: minted.key });
      expect(withoutSettler.status).toBe(402);
      expect(errorOf(withoutSettler)).toMatchObject({ code, accepts: [DELEGATE_ENTRY] });
      expect(withoutSettler.headers.get('payment-required')).toBeNull();
    },
  );
});
