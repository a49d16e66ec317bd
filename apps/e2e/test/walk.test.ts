import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatEther, JsonRpcProvider, Wallet, type HDNodeWallet } from 'ethers';
import OpenAI from 'openai';
import { connectJobRegistry, JobState } from '@svc/contracts';
import { paymentResponseOf, paymentSignatureForAnswer, prepaidDebitRequirementsOf } from '@svc/x402';
import { freePort, waitUntil } from '@svc/testkit';
import { repoRoot, signIn, Stack, type DevnetFile, type StackFile } from './support/stack.js';

// The API walked as a user walks it, against one `npm start` (embedded defaults, nothing configured
// but its port and state directory): a wallet signs in and manages keys, pays through its delegate or
// per call, and the official `openai` client talks to `/v1`.
//
// The stack is started once for the whole file (top-level beforeAll) and stays reachable through the
// module-level variables below, so later describe blocks (the `svc` command) can reuse it. Its env is
// the defaults: no limit is lowered. The walk pays from fresh wallets funded by the LAST account of
// stack.json and leaves every stack.json account without deposit or delegate.

/** The running `npm start`. */
let stack: Stack | undefined;
/** Its STATE_DIR (a fresh temporary directory). */
let stateDir: string;
/** The gateway, `http://localhost:<port>`. */
let base: string;
/** `<stateDir>/stack.json`, and what it held once the stack had started. */
let stackFilePath: string;
let stackFile: StackFile;
/** `<stateDir>/devnet.json` as read once the stack had started. */
let devnet: DevnetFile;

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), 'svc-e2e-state-'));
  const port = await freePort();
  base = `http://localhost:${port}`;
  stack = await Stack.start({
    PORT: String(port),
    STATE_DIR: stateDir,
    DEVNET_PORT: '0',
    // DEVNET_FILE unset: the description goes beside the rest of the state, <STATE_DIR>/devnet.json.
    // DEVNET_BLOCK_TIME=2 walks it on a chain with 2 s blocks instead of automine (issue 28).
    ...(process.env.DEVNET_BLOCK_TIME ? { DEVNET_BLOCK_TIME: process.env.DEVNET_BLOCK_TIME } : {}),
  });
  stackFilePath = join(stateDir, 'stack.json');
  stackFile = JSON.parse(readFileSync(stackFilePath, 'utf8')) as StackFile;
  devnet = JSON.parse(readFileSync(join(stateDir, 'devnet.json'), 'utf8')) as DevnetFile;
}, 120_000);

afterAll(async () => {
  await stack?.stopWithin(20_000);
  rmSync(stateDir, { recursive: true, force: true });
}, 30_000);

// ---------------------------------------------------------------------------------------------------

interface ApiKey {
  id: string;
  prefix: string;
  name: string;
  spendCapWei: string | null;
  spentWei: string;
  limitHits: { rate: number; concurrency: number; spendCap: number; sessionOpens: number };
  createdAt: string;
  revokedAt: string | null;
}
type MintedKey = ApiKey & { key: string };

interface ServiceObject {
  job_id: string;
  session_id: string;
  tx_hash: string;
  worker: string;
  dropped_messages?: number;
}

type ApiError = InstanceType<typeof OpenAI.APIError>;

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const noHits = { rate: 0, concurrency: 0, spendCap: 0, sessionOpens: 0 };
const echo = (content: string) =>
  new RegExp(`^You said: ${content.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\[conversation [0-9a-f]{16}\\]$`);

/** A key route (or any `/api` route) with a sign-in token. */
async function api(token: string, method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

async function listKeys(token: string): Promise<ApiKey[]> {
  const response = await api(token, 'GET', '/api/api-keys');
  expect(response.status).toBe(200);
  return (await response.json()) as ApiKey[];
}

async function keyById(token: string, id: string): Promise<ApiKey | undefined> {
  return (await listKeys(token)).find((key) => key.id === id);
}

/** Polls the listing (every 500 ms: key routes are rate limited per wallet) until `done` holds. */
async function listedUntil(token: string, id: string, done: (key: ApiKey) => boolean, what: string) {
  const key = await waitUntil(
    () => keyById(token, id),
    (listed) => listed !== undefined && done(listed),
    { what, timeoutMs: 15_000, intervalMs: 500 },
  );
  return key!;
}

async function mint(token: string, body: { name?: string; spendCapWei?: string | null }): Promise<MintedKey> {
  const response = await api(token, 'POST', '/api/api-keys', body);
  expect(response.status).toBe(201);
  return (await response.json()) as MintedKey;
}

/** The official client; no automatic retries, so every refusal is seen as answered. */
const openai = (apiKey: string) => new OpenAI({ apiKey, baseURL: `${base}/v1`, maxRetries: 0 });

/** The error a call is refused with (fails when it is answered). */
async function refusalOf(call: PromiseLike<unknown>): Promise<ApiError> {
  const outcome = await Promise.resolve(call).then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
  expect(outcome).toHaveProperty('error');
  const error = (outcome as { error: unknown }).error;
  expect(error).toBeInstanceOf(OpenAI.APIError);
  return error as ApiError;
}

const statusOf = async (call: PromiseLike<unknown>) => (await refusalOf(call)).status;

/**
 * The job of an answer, once its submission is mined: the answer may come before it (the worker starts
 * before inclusion, docs/protocol.md), and the chain's record and balances only show a mined job.
 */
async function minedJob(
  provider: JsonRpcProvider,
  registry: ReturnType<typeof connectJobRegistry>,
  service: { job_id: string; tx_hash: string },
) {
  const receipt = await provider.waitForTransaction(service.tx_hash, 1, 60_000);
  expect(receipt?.status).toBe(1);
  return registry.getJob(BigInt(service.job_id));
}

const models = (apiKey: string) =>
  fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${apiKey}` } });

describe('the API walked by a user: a wallet, the openai client, per-call payments', () => {
  let provider: JsonRpcProvider;
  /** Pays for the walk's wallets (the last stack.json account). */
  let funder: Wallet;
  /** The wallet whose keys are paid through its delegate (steps 2 to 5, 7 and 8). */
  let payer: HDNodeWallet;
  let payerToken: string;
  /** `payer`'s key, once its delegate is authorized. */
  let payerKey: string;
  let model: string;
  /** The model's job fee as the devnet advertises it. */
  let fee: bigint;
  let registry: ReturnType<typeof connectJobRegistry>;

  const funded = async (value = 10n ** 17n): Promise<HDNodeWallet> => {
    const wallet = Wallet.createRandom().connect(provider);
    await (await funder.sendTransaction({ to: wallet.address, value })).wait();
    return wallet;
  };
  const balances = async (address: string) => ({
    prepaid: await registry.prepaidBalanceOf(address),
    allowance: await registry.delegateAllowance(address, stackFile.delegate!),
  });

  beforeAll(async () => {
    provider = new JsonRpcProvider(stackFile.rpcUrl, stackFile.chainId, {
      staticNetwork: true,
      pollingInterval: 250,
    });
    funder = new Wallet(stackFile.accounts.at(-1)!.privateKey, provider);
    registry = connectJobRegistry(stackFile.contracts.jobRegistry, provider);
    model = stackFile.models[0]!;
    fee = BigInt(devnet.models.find((entry) => entry.name === model)!.feeWei);
    expect(fee).toBeGreaterThan(0n);
    payer = await funded();
  }, 60_000);

  afterAll(() => provider?.destroy());

  it('1. signs a wallet in, then mints, lists, caps, revokes and deletes its keys', async () => {
    const wallet = Wallet.createRandom();
    const challenge = await fetch(`${base}/api/auth/challenge?address=${wallet.address}`);
    expect(challenge.status).toBe(200);
    const { nonce, message } = (await challenge.json()) as { nonce: string; message: string };
    expect(nonce).toMatch(/^[0-9a-f]{32}$/);
    expect(message).toContain(wallet.address);
    expect(message).toContain(`Nonce: ${nonce}`);
    expect(message).toContain(`Chain ID: ${stackFile.chainId}`);
    const verify = await fetch(`${base}/api/auth/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message, signature: await wallet.signMessage(message) }),
    });
    expect(verify.status).toBe(200);
    const session = (await verify.json()) as { token: string; expiresAt: string; address: string };
    expect(session.address).toBe(wallet.address);
    const lifetime = Date.parse(session.expiresAt) - Date.now();
    expect(lifetime).toBeGreaterThan(55 * 60_000);
    expect(lifetime).toBeLessThanOrEqual(60 * 60_000);
    const token = session.token;
    // The nonce is spent: the same signed message does not sign in twice.
    const again = await fetch(`${base}/api/auth/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message, signature: await wallet.signMessage(message) }),
    });
    expect(again.status).toBe(401);

    // Mint: the key once, and the key as listed.
    const first = await mint(token, { name: 'walk first', spendCapWei: '1000' });
    expect(first).toEqual({
      id: expect.stringMatching(UUID),
      key: expect.stringMatching(/^svc_[0-9A-Za-z]{43}$/),
      prefix: first.key.slice(0, 11),
      name: 'walk first',
      spendCapWei: '1000',
      spentWei: '0',
      limitHits: noHits,
      createdAt: expect.stringMatching(ISO_TIME),
      revokedAt: null,
    });
    const second = await mint(token, {});
    expect(second).toMatchObject({ name: '', spendCapWei: null, prefix: second.key.slice(0, 11) });
    expect(second.id).not.toBe(first.id);
    expect(await models(first.key).then((response) => response.status)).toBe(200);

    // List: newest first, the key itself never again.
    const listing = await api(token, 'GET', '/api/api-keys');
    expect(listing.status).toBe(200);
    expect(listing.headers.get('cache-control')).toBe('no-store');
    const listed = (await listing.json()) as ApiKey[];
    const { key: firstKey, ...firstListed } = first;
    const { key: secondKey, ...secondListed } = second;
    expect(listed).toEqual([secondListed, firstListed]);
    expect(JSON.stringify(listed)).not.toContain(firstKey);
    expect(JSON.stringify(listed)).not.toContain(secondKey);

    // The cap: set, then removed.
    const capped = await api(token, 'PATCH', `/api/api-keys/${first.id}`, { spendCapWei: '5000' });
    expect(capped.status).toBe(200);
    expect(await capped.json()).toEqual({ ...firstListed, spendCapWei: '5000' });
    const uncapped = await api(token, 'PATCH', `/api/api-keys/${first.id}`, { spendCapWei: null });
    expect(uncapped.status).toBe(200);
    expect(await uncapped.json()).toEqual({ ...firstListed, spendCapWei: null });
    expect((await keyById(token, first.id))!.spendCapWei).toBeNull();

    // Delete refuses an active key; revoke, then delete.
    const active = await api(token, 'DELETE', `/api/api-keys/${first.id}`);
    expect(active.status).toBe(409);
    expect(((await active.json()) as { error: string }).error).toBe('api_key_active');
    expect((await keyById(token, first.id))!.revokedAt).toBeNull();

    expect((await api(token, 'POST', `/api/api-keys/${first.id}/revoke`)).status).toBe(204);
    const revoked = (await keyById(token, first.id))!;
    expect(revoked).toEqual({
      ...firstListed,
      spendCapWei: null,
      revokedAt: expect.stringMatching(ISO_TIME),
    });
    expect(Date.parse(revoked.revokedAt!)).toBeGreaterThanOrEqual(Date.parse(first.createdAt));
    expect(await models(first.key).then((response) => response.status)).toBe(401);
    const patchRevoked = await api(token, 'PATCH', `/api/api-keys/${first.id}`, { spendCapWei: '1' });
    expect(patchRevoked.status).toBe(409);
    expect(((await patchRevoked.json()) as { error: string }).error).toBe('api_key_revoked');

    expect((await api(token, 'DELETE', `/api/api-keys/${first.id}`)).status).toBe(204);
    expect(await listKeys(token)).toEqual([secondListed]);
    const gone = await api(token, 'DELETE', `/api/api-keys/${first.id}`);
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { error: string }).error).toBe('api_key_not_found');
    // The other key is untouched.
    expect(await models(second.key).then((response) => response.status)).toBe(200);
  }, 60_000);

  it('2. refuses a completion 402 delegate_not_authorized until the wallet sends error.accepts[0].transaction, then serves it', async () => {
    payerToken = (await signIn(base, payer)).token;
    payerKey = (await mint(payerToken, { name: 'walk payer' })).key;
    const client = openai(payerKey);
    const ask = () => client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }] });

    const refusal = await refusalOf(ask());
    expect(refusal.status).toBe(402);
    expect(refusal.code).toBe('delegate_not_authorized');
    const accepts = (refusal.error as { accepts: unknown[] }).accepts;
    expect(accepts[0]).toEqual({
      scheme: 'delegate',
      chain_id: stackFile.chainId,
      payer: payer.address,
      delegate: stackFile.delegate,
      instruction: {
        contract: stackFile.contracts.jobRegistry,
        function: 'depositAndAuthorize(address)',
        args: [stackFile.delegate],
        minimum_value_wei: expect.stringMatching(/^[0-9]+$/),
      },
      transaction: {
        to: stackFile.contracts.jobRegistry,
        data: expect.stringMatching(/^0x[0-9a-f]+$/),
        value: expect.stringMatching(/^[0-9]+$/),
        chainId: stackFile.chainId,
      },
    });
    const option = accepts[0] as {
      instruction: { minimum_value_wei: string };
      transaction: { to: string; data: string; value: string };
    };
    // With nothing deposited, the least value that covers the refused call is the model's fee, and the
    // ready-to-send transaction is that same call.
    expect(option.instruction.minimum_value_wei).toBe(fee.toString());
    expect(option.transaction.value).toBe(fee.toString());
    // This server takes per-call payments too: the prepaid-debit entry follows, also in PAYMENT-REQUIRED.
    const perCall = prepaidDebitRequirementsOf(refusal.headers!);
    expect(perCall).toMatchObject({
      scheme: 'prepaid-debit',
      payTo: stackFile.delegate,
      amount: fee.toString(),
    });
    expect(accepts[1]).toEqual(perCall);

    // Nothing changed on chain: still refused.
    expect((await refusalOf(ask())).code).toBe('delegate_not_authorized');

    // The transaction as listed covers the refused call.
    const listedValue = BigInt(option.transaction.value);
    await (
      await payer.sendTransaction({
        to: option.transaction.to,
        data: option.transaction.data,
        value: listedValue,
      })
    ).wait();
    expect(await balances(payer.address)).toEqual({ prepaid: listedValue, allowance: listedValue });

    const answer = await ask();
    expect(answer.choices[0]!.message.content).toMatch(echo('hi'));
    const service = (answer as unknown as { service: ServiceObject }).service;
    const job = await minedJob(provider, registry, service);
    expect(job.payer).toBe(payer.address);
    expect(job.delegate).toBe(stackFile.delegate);
    expect(job.fee).toBe(fee);
    // Paid from the prepaid balance, through the allowance: exactly the fee.
    const left = listedValue - fee;
    expect(await balances(payer.address)).toEqual({ prepaid: left, allowance: left });

    // Once the balance cannot cover a fee, the same kind of transaction tops it up; this time with
    // enough for the rest of the walk (any value at least the minimum will do).
    const empty = await refusalOf(ask());
    expect(empty.status).toBe(402);
    expect(empty.code).toBe('insufficient_balance');
    const topUp = (empty.error as { accepts: Array<{ transaction: { to: string; data: string } }> })
      .accepts[0]!;
    const value = 100n * fee;
    await (
      await payer.sendTransaction({ to: topUp.transaction.to, data: topUp.transaction.data, value })
    ).wait();
    expect(await balances(payer.address)).toEqual({ prepaid: left + value, allowance: left + value });
    const toppedUp = await ask();
    expect(toppedUp.choices[0]!.message.content).toMatch(echo('hi'));
    await minedJob(provider, registry, (toppedUp as unknown as { service: ServiceObject }).service);
    expect(await balances(payer.address)).toEqual({
      prepaid: left + value - fee,
      allowance: left + value - fee,
    });
  }, 60_000);

  it('3. answers streamed and not streamed, with the service object in the body and on the last chunk equal to x-service', async () => {
    const client = openai(payerKey);
    const workers = devnet.accounts
      .filter((account) => account.role === 'worker')
      .map((account) => account.address);
    const checkService = async (service: ServiceObject) => {
      expect(service).toEqual({
        job_id: expect.stringMatching(/^[0-9]+$/),
        session_id: expect.stringMatching(/^[0-9]+$/),
        tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
        worker: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
      });
      expect(workers).toContain(service.worker);
      // The figures are the chain's: the job, its session and worker, submitted by tx_hash.
      // The answer ends on the worker's signed final; its commitment on chain follows.
      const settled = [BigInt(JobState.Completed), BigInt(JobState.Released)];
      const job = await waitUntil(
        () => registry.getJob(BigInt(service.job_id)),
        (read) => settled.includes(read.state),
        { what: `job ${service.job_id} committed`, timeoutMs: 60_000 },
      );
      expect(job.payer).toBe(payer.address);
      expect(job.sessionId).toBe(BigInt(service.session_id));
      expect(job.worker).toBe(service.worker);
      const receipt = await provider.getTransactionReceipt(service.tx_hash);
      expect(receipt?.status).toBe(1);
      expect(receipt?.to).toBe(stackFile.contracts.jobRegistry);
    };

    // Not streamed: one chat.completion, with `service`.
    const whole = await client.chat.completions
      .create({ model, messages: [{ role: 'user', content: 'all at once' }] })
      .withResponse();
    expect(whole.data).toMatchObject({
      object: 'chat.completion',
      model,
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant' } }],
    });
    expect(whole.data.choices).toHaveLength(1);
    expect(whole.data.choices[0]!.message.content).toMatch(echo('all at once'));
    const wholeService = (whole.data as unknown as { service: ServiceObject }).service;
    expect(JSON.parse(whole.response.headers.get('x-service')!)).toEqual(wholeService);
    await checkService(wholeService);

    // Streamed: chunks, the last one with finish_reason stop and `service`.
    const streamed = await client.chat.completions
      .create({ model, messages: [{ role: 'user', content: 'stream me' }], stream: true })
      .withResponse();
    expect(streamed.response.headers.get('content-type')).toContain('text/event-stream');
    const header = JSON.parse(streamed.response.headers.get('x-service')!) as ServiceObject;
    const chunks: Array<OpenAI.Chat.Completions.ChatCompletionChunk & { service?: ServiceObject }> = [];
    for await (const chunk of streamed.data) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThanOrEqual(3);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: 'assistant', content: '' });
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
    const text = chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join('');
    expect(text).toMatch(echo('stream me'));
    const last = chunks.at(-1)!;
    expect(last.choices[0]!.finish_reason).toBe('stop');
    expect(last.service).toEqual(header);
    expect(chunks.slice(0, -1).every((chunk) => chunk.service === undefined)).toBe(true);
    await checkService(header);
    expect(header.job_id).not.toBe(wholeService.job_id);
  }, 60_000);

  it('4. refuses a key at its spend cap 402 spend_cap_exceeded, serves it again once PATCH raises the cap, and counts the hit', async () => {
    const capped = await mint(payerToken, { name: 'walk capped', spendCapWei: fee.toString() });
    const client = openai(capped.key);
    const ask = (content: string) =>
      client.chat.completions.create({ model, messages: [{ role: 'user', content }] });

    expect((await ask('within the cap')).choices[0]!.message.content).toMatch(echo('within the cap'));
    await listedUntil(
      payerToken,
      capped.id,
      (key) => key.spentWei === fee.toString(),
      'the fee counted as spent',
    );

    const before = await balances(payer.address);
    const refusal = await refusalOf(ask('past the cap'));
    expect(refusal.status).toBe(402);
    expect(refusal.code).toBe('spend_cap_exceeded');
    expect((refusal.error as { spend_cap_wei: string }).spend_cap_wei).toBe(fee.toString());
    // The job never ran: nothing was charged.
    expect(await balances(payer.address)).toEqual(before);

    const raised = await api(payerToken, 'PATCH', `/api/api-keys/${capped.id}`, {
      spendCapWei: (2n * fee).toString(),
    });
    expect(raised.status).toBe(200);
    expect(((await raised.json()) as ApiKey).spendCapWei).toBe((2n * fee).toString());
    expect((await ask('cap raised')).choices[0]!.message.content).toMatch(echo('cap raised'));

    const listed = await listedUntil(
      payerToken,
      capped.id,
      (key) => key.limitHits.spendCap > 0 && key.spentWei === (2n * fee).toString(),
      'limitHits.spendCap and the second fee in the listing',
    );
    expect(listed.limitHits).toEqual({ ...noHits, spendCap: 1 });
    // At the raised cap again.
    expect((await refusalOf(ask('past the raised cap'))).code).toBe('spend_cap_exceeded');
  }, 60_000);

  it('5. answers a key, then refuses it 401 invalid_api_key once it is revoked between two calls', async () => {
    const minted = await mint(payerToken, { name: 'walk revoked' });
    const client = openai(minted.key);
    const ask = (content: string) =>
      client.chat.completions.create({ model, messages: [{ role: 'user', content }] });

    expect((await ask('before revoke')).choices[0]!.message.content).toMatch(echo('before revoke'));
    expect((await api(payerToken, 'POST', `/api/api-keys/${minted.id}/revoke`)).status).toBe(204);
    const refusal = await refusalOf(ask('after revoke'));
    expect(refusal.status).toBe(401);
    expect(refusal.code).toBe('invalid_api_key');
    expect(await statusOf(client.models.list())).toBe(401);
    // The wallet's other keys still work.
    expect((await openai(payerKey).models.list()).data.map((entry) => entry.id)).toContain(model);
  }, 60_000);

  it('6. takes a keyless call paid per call (x402): 402 with the requirements, then an answer debited exactly the fee, and refuses a replay', async () => {
    const wallet = await funded();
    const asWallet = connectJobRegistry(stackFile.contracts.jobRegistry, wallet);
    await (await asWallet.deposit({ value: 10n ** 16n })).wait();
    const call = (headers: Record<string, string>) =>
      fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'pay per call' }] }),
      });

    const required = await call({});
    expect(required.status).toBe(402);
    const body = (await required.json()) as { error: { code: string; accepts: unknown[] } };
    expect(body.error.code).toBe('payment_required');
    const requirements = prepaidDebitRequirementsOf(required.headers)!;
    expect(requirements).toMatchObject({
      scheme: 'prepaid-debit',
      network: `eip155:${stackFile.chainId}`,
      asset: stackFile.contracts.jobRegistry,
      amount: fee.toString(),
      payTo: stackFile.delegate,
      extra: { facilitatorAddress: stackFile.facilitator },
    });
    expect(body.error.accepts).toEqual([requirements]);

    const before = await registry.prepaidBalanceOf(wallet.address);
    const paymentSignature = await paymentSignatureForAnswer(wallet, required.headers);
    const paid = await call({ 'payment-signature': paymentSignature });
    expect(paid.status).toBe(200);
    const answer = (await paid.json()) as {
      choices: { message: { content: string } }[];
      service: ServiceObject;
    };
    expect(answer.choices[0]!.message.content).toMatch(echo('pay per call'));
    expect(JSON.parse(paid.headers.get('x-service')!)).toEqual(answer.service);
    expect(paymentResponseOf(paid.headers)).toEqual({
      success: true,
      transaction: answer.service.tx_hash,
      network: `eip155:${stackFile.chainId}`,
      payer: wallet.address,
      amount: fee.toString(),
    });
    const job = await minedJob(provider, registry, answer.service);
    expect(before - (await registry.prepaidBalanceOf(wallet.address))).toBe(fee);
    expect(job.payer).toBe(wallet.address);
    expect((await provider.getTransactionReceipt(answer.service.tx_hash))?.status).toBe(1);

    // The same payment again is refused as used, and charges nothing more.
    const replayed = await call({ 'payment-signature': paymentSignature });
    expect(replayed.status).toBe(402);
    expect(((await replayed.json()) as { error: { code: string } }).error.code).toBe(
      'invalid_prepaid_debit_payload_nonce_used',
    );
    expect(before - (await registry.prepaidBalanceOf(wallet.address))).toBe(fee);
  }, 60_000);

  it('6b. streams a call paid per call, and holds a payer to one call in flight: the refused one pays nothing', async () => {
    const wallet = await funded();
    const asWallet = connectJobRegistry(stackFile.contracts.jobRegistry, wallet);
    await (await asWallet.deposit({ value: 10n ** 16n })).wait();
    const call = (headers: Record<string, string>, content: string, stream = false) =>
      fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ model, messages: [{ role: 'user', content }], stream }),
      });
    const required = await call({}, 'price?');
    expect(required.status).toBe(402);
    expect(BigInt(prepaidDebitRequirementsOf(required.headers)!.amount)).toBe(fee);
    const before = await registry.prepaidBalanceOf(wallet.address);

    const streamed = await call(
      { 'payment-signature': await paymentSignatureForAnswer(wallet, required.headers) },
      'stream per call',
      true,
    );
    expect(streamed.status).toBe(200);
    expect(streamed.headers.get('content-type')).toContain('text/event-stream');
    const service = JSON.parse(streamed.headers.get('x-service')!) as ServiceObject;
    expect(paymentResponseOf(streamed.headers)).toMatchObject({
      success: true,
      transaction: service.tx_hash,
      amount: fee.toString(),
    });
    const events = (await streamed.text()).trimEnd().split('\n\n');
    expect(events.at(-1)).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map(
      (event) =>
        JSON.parse(event.replace(/^data: /, '')) as {
          choices: { delta: { content?: string } }[];
          service?: ServiceObject;
        },
    );
    expect(chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')).toMatch(
      echo('stream per call'),
    );
    expect(chunks.at(-1)!.service).toEqual(service);
    await minedJob(provider, registry, service);
    expect(before - (await registry.prepaidBalanceOf(wallet.address))).toBe(fee);

    // Two payments of one payer at once, with a limit of one in flight: exactly one is refused, unpaid.
    const [a, b] = await Promise.all([
      paymentSignatureForAnswer(wallet, required.headers),
      paymentSignatureForAnswer(wallet, required.headers),
    ]);
    const answers = await Promise.all([
      call({ 'payment-signature': a }, 'one at a time'),
      call({ 'payment-signature': b }, 'one at a time'),
    ]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 429]);
    const refused = answers.find((answer) => answer.status === 429)!;
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
      'concurrency_limit_exceeded',
    );
    expect(refused.headers.get('retry-after')).toMatch(/^[0-9]+$/);
    const served = answers.find((answer) => answer.status === 200)!;
    await minedJob(provider, registry, JSON.parse(served.headers.get('x-service')!) as ServiceObject);
    expect(before - (await registry.prepaidBalanceOf(wallet.address))).toBe(2n * fee);
  }, 60_000);

  it('7. drops the oldest messages of a long conversation to fit one job (service.dropped_messages), and refuses a last turn too big alone 400 context_length_exceeded', async () => {
    const client = openai(payerKey);
    // Eight 20 KiB messages (160 KiB) before the last turn; one job's prompt holds about 124 KiB once
    // encrypted, so at least two must go, and six (120 KiB) fit.
    const history: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = Array.from(
      { length: 8 },
      (_, index) => ({
        role: index % 2 === 0 ? ('user' as const) : ('assistant' as const),
        content: `message ${index}: ${'x'.repeat(20 * 1024)}`,
      }),
    );
    const before = await balances(payer.address);
    const long = await client.chat.completions
      .create({
        model,
        messages: [
          { role: 'system', content: 'be brief' },
          ...history,
          { role: 'user', content: 'and now?' },
        ],
      })
      .withResponse();
    expect(long.data.choices[0]!.message.content).toMatch(echo('and now?'));
    const service = (long.data as unknown as { service: ServiceObject }).service;
    expect(service.dropped_messages).toBeGreaterThanOrEqual(2);
    expect(service.dropped_messages).toBeLessThanOrEqual(3);
    expect(JSON.parse(long.response.headers.get('x-service')!)).toEqual(service);
    await minedJob(provider, registry, service);
    expect((await balances(payer.address)).prepaid).toBe(before.prepaid - fee);

    // A short conversation drops nothing, and says so by leaving the field out.
    const short = await client.chat.completions.create({
      model,
      messages: [...history.slice(0, 2), { role: 'user', content: 'short' }],
    });
    expect((short as unknown as { service: ServiceObject }).service).not.toHaveProperty('dropped_messages');
    await minedJob(provider, registry, (short as unknown as { service: ServiceObject }).service);

    // The last turn alone does not fit: refused before any job, nothing charged.
    const charged = await balances(payer.address);
    const refusal = await refusalOf(
      client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'y'.repeat(130 * 1024) }],
      }),
    );
    expect(refusal.status).toBe(400);
    expect(refusal.code).toBe('context_length_exceeded');
    expect(await balances(payer.address)).toEqual(charged);
  }, 60_000);

  it('8. answers 429 rate_limit_exceeded with retry-after and x-ratelimit-* once a key passes its rate, on that key only', async () => {
    // A key of its own: the per-key budget of the other steps' keys is untouched.
    const minted = await mint(payerToken, { name: 'walk rate' });
    const first = await models(minted.key);
    expect(first.status).toBe(200);
    const limit = Number(first.headers.get('x-ratelimit-limit'));
    expect(Number.isInteger(limit) && limit > 0).toBe(true);
    expect(Number(first.headers.get('x-ratelimit-remaining'))).toBe(limit - 1);

    let served = 1;
    let refused: Response | undefined;
    while (!refused && served <= limit) {
      const response = await models(minted.key);
      if (response.status === 429) refused = response;
      else {
        expect(response.status).toBe(200);
        served += 1;
        expect(Number(response.headers.get('x-ratelimit-remaining'))).toBe(limit - served);
      }
    }
    // Exactly the limit was served, then the next call was refused.
    expect(served).toBe(limit);
    expect(refused).toBeDefined();
    expect(refused!.headers.get('retry-after')).toMatch(/^[1-9][0-9]*$/);
    expect(Number(refused!.headers.get('x-ratelimit-limit'))).toBe(limit);
    expect(refused!.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(await refused!.json()).toMatchObject({
      error: { type: 'rate_limit_error', code: 'rate_limit_exceeded' },
    });
    // The openai client sees the same refusal (no retries here).
    const viaClient = await refusalOf(openai(minted.key).models.list());
    expect(viaClient.status).toBe(429);
    expect(viaClient.code).toBe('rate_limit_exceeded');

    // Another key of the same wallet has its own budget.
    expect((await models(payerKey)).status).toBe(200);
    // Both refusals (the loop's and the client's) are counted, within a flush interval or two.
    const listed = await listedUntil(
      payerToken,
      minted.id,
      (key) => key.limitHits.rate >= 2,
      'limitHits.rate',
    );
    expect(listed.limitHits).toEqual({ ...noHits, rate: 2 });
  }, 60_000);
});

// ---------------------------------------------------------------------------------------------------

/** `svc usage --json`: `GET /api/usage` as far as this walk reads it (docs/api.md, Usage). */
interface UsageList {
  data: {
    id: string;
    time: string;
    keyId: string | null;
    payer: string;
    payment: string;
    model: string;
    outcome: string;
    jobId: string | null;
    txHash: string | null;
    feeWei: string | null;
    totalTimeMs: number | null;
  }[];
  nextCursor: string | null;
  summary: { outcomes: { outcome: string; calls: number }[] } | null;
}

/** What one run of the `svc` command printed, and its exit code. */
interface SvcRun {
  code: number;
  stdout: string;
  stderr: string;
}

describe('the svc command, as the start-up summary tells a newcomer to use it', () => {
  let configDir: string;
  let provider: JsonRpcProvider;
  let registry: ReturnType<typeof connectJobRegistry>;
  /** The demo wallet's calls the first walk made, for `svc usage` to list. */
  let demoCalls:
    | { keyId: string; keyed: ServiceObject; keyedFee: bigint; paid: ServiceObject; paidFee: bigint }
    | undefined;

  /**
   * Runs the `svc` bin by its path, as the summary's alias does, in its own process with only PATH, HOME,
   * the stack's STATE_DIR (where it finds stack.json) and `env`, from a directory outside the checkout;
   * never throws on a non-zero exit.
   */
  const svc = (args: string[], env: Record<string, string> = {}): Promise<SvcRun> =>
    new Promise((resolve, reject) => {
      const child = spawn(join(repoRoot, 'node_modules', '.bin', 'svc'), args, {
        cwd: configDir,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          STATE_DIR: stateDir,
          SVC_CONFIG_DIR: configDir,
          ...env,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    });
  const json = <T>(run: SvcRun): T => JSON.parse(run.stdout) as T;

  beforeAll(() => {
    configDir = mkdtempSync(join(tmpdir(), 'svc-e2e-config-'));
    provider = new JsonRpcProvider(stackFile.rpcUrl, stackFile.chainId, { staticNetwork: true });
    registry = connectJobRegistry(stackFile.contracts.jobRegistry, provider);
  });

  afterAll(() => {
    provider?.destroy();
    rmSync(configDir, { recursive: true, force: true });
  });

  it("runs the summary's three commands with the demo wallet: sign in and mint a saved key, chat, pay per call", async () => {
    const demo = stackFile.demoWallet!;
    expect(demo).toBeTruthy();
    const env = { SVC_PRIVATE_KEY: demo.privateKey };

    const login = await svc(['login'], env);
    expect(login).toMatchObject({ code: 0, stderr: '' });
    expect(login.stdout).toContain(`Signed in as ${demo.address}`);
    // The token is kept owner-only, under the config dir.
    const credentials = join(configDir, 'credentials.json');
    expect(statSync(credentials).mode & 0o777).toBe(0o600);
    expect(statSync(configDir).mode & 0o777).toBe(0o700);

    const created = await svc(['keys', 'create', '--name', 'demo', '--save'], env);
    expect(created.code).toBe(0);
    const key = created.stdout.split('\n')[0]!;
    expect(key).toMatch(/^svc_[0-9A-Za-z]{43}$/);
    expect(created.stdout).toContain('only time the key is shown');

    const before = await registry.prepaidBalanceOf(demo.address);
    const chat = await svc(['chat', 'Hello', '--verbose'], env);
    expect(chat.code).toBe(0);
    expect(chat.stdout).toMatch(/^You said: Hello \[conversation [0-9a-f]{16}\]\nservice \{/);
    const service = JSON.parse(chat.stdout.slice(chat.stdout.indexOf('{'))) as ServiceObject;
    expect(service).toMatchObject({ job_id: expect.any(String), tx_hash: expect.stringMatching(/^0x/) });
    const job = await minedJob(provider, registry, service);
    expect(job.payer).toBe(demo.address);

    // Pay per call: the call goes without the key, paid from the same prepaid balance.
    const paid = await svc(['pay', 'Hello', '--yes', '--json'], env);
    expect(paid.code).toBe(0);
    const answer = json<{ text: string; service: ServiceObject; payment: Record<string, string> }>(paid);
    expect(answer.text).toMatch(/^You said: Hello /);
    expect(answer.payment).toMatchObject({
      success: true,
      payer: demo.address,
      transaction: answer.service.tx_hash,
    });
    const paidJob = await minedJob(provider, registry, answer.service);
    expect(paidJob.payer).toBe(demo.address);
    expect(before - (await registry.prepaidBalanceOf(demo.address))).toBe(
      job.fee + BigInt(answer.payment.amount!),
    );
    demoCalls = {
      keyId: /^Key (\S+) \(/m.exec(created.stdout)![1]!,
      keyed: service,
      keyedFee: job.fee,
      paid: answer.service,
      paidFee: paidJob.fee,
    };

    // Without --yes and no terminal to ask on, nothing is paid.
    const unconfirmed = await svc(['pay', 'Hello'], env);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toMatch(/^svc: Pay [0-9]+ wei .* Confirm with --yes/);

    // A price above --max is declined before anything is signed: exit 6, nothing paid.
    const balance = await registry.prepaidBalanceOf(demo.address);
    const tooDear = await svc(['pay', 'Hello', '--yes', '--max', '1'], env);
    expect(tooDear.code).toBe(6);
    expect(tooDear.stderr).toMatch(
      /^svc: the call costs [0-9]+ wei .*, above --max 1 wei .*: nothing was paid\.\n$/,
    );
    expect(await registry.prepaidBalanceOf(demo.address)).toBe(balance);
  }, 90_000);

  it('lists those calls with svc usage: a table, --json, --key, --since, --limit and --all', async () => {
    expect(demoCalls).toBeDefined();
    const { keyId, keyed, keyedFee, paid, paidFee } = demoCalls!;
    const env = { SVC_PRIVATE_KEY: stackFile.demoWallet!.privateKey };

    // The usage is written from the calls' lifecycle events: wait until both have ended there, with
    // their fees (about one `svc usage` a second: `/api` is rate limited per wallet).
    const usage = await waitUntil(
      async () => json<UsageList>(await svc(['usage', '--json'], env)),
      (listed) =>
        listed.data.filter(
          (call) => call.outcome === 'answered' && call.totalTimeMs !== null && call.feeWei !== null,
        ).length >= 2,
      { what: "the demo wallet's two calls in svc usage", timeoutMs: 30_000, intervalMs: 1_000 },
    );
    // Only the two calls that reached the service: the unconfirmed and the declined `pay` sent none.
    expect(usage.data).toHaveLength(2);
    expect(usage.nextCursor).toBeNull();
    const [newest, oldest] = usage.data;
    expect(oldest).toMatchObject({
      keyId,
      payment: 'api_key',
      payer: stackFile.demoWallet!.address,
      outcome: 'answered',
      jobId: keyed.job_id,
      txHash: keyed.tx_hash,
      feeWei: keyedFee.toString(),
    });
    expect(newest).toMatchObject({
      keyId: null,
      payment: 'per_call',
      payer: stackFile.demoWallet!.address,
      outcome: 'answered',
      jobId: paid.job_id,
      txHash: paid.tx_hash,
      feeWei: paidFee.toString(),
    });
    for (const call of usage.data) expect(call.time).toMatch(ISO_TIME);
    expect(usage.summary?.outcomes).toEqual([{ outcome: 'answered', calls: 2 }]);

    // The table: a row per call, newest first, and the summary line with what they cost.
    const table = await svc(['usage'], env);
    expect(table).toMatchObject({ code: 0, stderr: '' });
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^TIME \(UTC\) +KEY +MODEL +OUTCOME +FEE \(ETH\) +FIRST\/TOTAL MS +JOB +TX$/);
    const cells = (line: string) => line.split(/ {2,}/);
    const short = (hash: string) => `${hash.slice(0, 8)}…${hash.slice(-4)}`;
    expect(cells(lines[1]!)).toEqual([
      expect.stringMatching(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/),
      'per call',
      newest!.model,
      'answered',
      expect.stringMatching(/^0\.\d+$/),
      expect.stringMatching(/^\d+\/\d+$/),
      paid.job_id,
      short(paid.tx_hash),
    ]);
    expect(cells(lines[2]!).slice(1, 4)).toEqual([keyId, oldest!.model, 'answered']);
    expect(cells(lines[2]!).slice(6)).toEqual([keyed.job_id, short(keyed.tx_hash)]);
    expect(lines[3]).toBe('');
    expect(lines[4]).toBe(
      `2 calls (2 answered), spent ${keyedFee + paidFee} wei (${formatEther(keyedFee + paidFee)} ETH).`,
    );
    expect(lines).toHaveLength(5);

    // --key: only that key's call; --since: a relative time and a date.
    const ofKey = json<UsageList>(await svc(['usage', '--json', '--key', keyId], env));
    expect(ofKey.data.map((call) => call.jobId)).toEqual([keyed.job_id]);
    expect(ofKey.summary?.outcomes).toEqual([{ outcome: 'answered', calls: 1 }]);
    expect(json<UsageList>(await svc(['usage', '--json', '--since', '1h'], env)).data).toHaveLength(2);
    const later = await svc(['usage', '--since', '2099-01-01'], env);
    expect(later).toMatchObject({ code: 0, stdout: 'No calls since 2099-01-01.\n' });

    // A page at a time: --limit 1 says more follow, --all follows the cursor.
    const page = await svc(['usage', '--limit', '1'], env);
    expect(page.code).toBe(0);
    expect(page.stdout).toContain('Showing the newest 1 of 2: --all lists every one');
    const all = json<UsageList>(await svc(['usage', '--json', '--limit', '1', '--all'], env));
    expect(all.data.map((call) => call.id)).toEqual(usage.data.map((call) => call.id));
    expect(all.nextCursor).toBeNull();

    // Usage errors are exit 2, before anything is sent.
    const bad = await svc(['usage', '--since', 'yesterday'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^svc: --since "yesterday" is not a time: /);
  }, 90_000);

  it('walks a new wallet from a 402 to an answer: authorize as the error says, balance, cap, revoke, delete, exit codes', async () => {
    const wallet = Wallet.createRandom();
    const funder = new Wallet(stackFile.accounts[0]!.privateKey, provider);
    await (await funder.sendTransaction({ to: wallet.address, value: 10n ** 17n })).wait();
    const env = { SVC_PRIVATE_KEY: wallet.privateKey };

    // Not signed in: exit 3, one line naming the remedy.
    const early = await svc(['keys', 'list'], env);
    expect(early).toMatchObject({ code: 3, stdout: '' });
    expect(early.stderr).toBe(
      `svc: unauthorized: ${wallet.address} is not signed in at ${base}. Run: svc login\n`,
    );

    expect((await svc(['login'], env)).code).toBe(0);
    const minted = json<{ id: string; key: string; spendCapWei: string; saved: boolean }>(
      await svc(['keys', 'create', '--cap', '0.001ether', '--save', '--json'], env),
    );
    expect(minted).toMatchObject({ spendCapWei: '1000000000000000', saved: true });

    // The wallet has no delegate: exit 4, the code, and the command carrying the remedy.
    const refused = await svc(['chat', 'hi'], env);
    expect(refused.code).toBe(4);
    expect(refused.stderr).toMatch(
      /^svc: delegate_not_authorized: .+ Run: svc authorize [0-9]+ \(or more\)\n$/,
    );
    const refusedJson = json<{ error: { code: string; accepts: { scheme: string }[] } }>(
      await svc(['chat', 'hi', '--json'], env),
    );
    expect(refusedJson.error.code).toBe('delegate_not_authorized');
    expect(refusedJson.error.accepts.map((entry) => entry.scheme)).toEqual(['delegate', 'prepaid-debit']);

    const authorized = await svc(['authorize', '0.01ether', '--json'], env);
    expect(authorized.code).toBe(0);
    const receipt = await provider.getTransactionReceipt(
      json<{ transaction: string }>(authorized).transaction,
    );
    expect(receipt?.status).toBe(1);
    const balance = json<{ prepaidBalanceWei: string; delegateAuthorized: boolean; allowanceWei: string }>(
      await svc(['balance', '--json'], env),
    );
    expect(balance).toMatchObject({
      prepaidBalanceWei: (10n ** 16n).toString(),
      delegateAuthorized: true,
      allowanceWei: (10n ** 16n).toString(),
    });

    const chat = await svc(
      ['chat', 'now', 'paid', '--system', 'be brief', '--conversation', 'cli-walk', '--json'],
      env,
    );
    expect(chat.code).toBe(0);
    expect(json<{ text: string }>(chat).text).toMatch(/^You said: now paid \[conversation /);

    // A cap below what the key spent refuses the next call: exit 4 naming `svc keys cap`.
    expect((await svc(['keys', 'cap', minted.id, '1'], env)).code).toBe(0);
    const capped = await svc(['chat', 'over the cap'], env);
    expect(capped.code).toBe(4);
    // The saved key's id is known, so the command to run names it.
    expect(capped.stderr).toMatch(/^svc: spend_cap_exceeded: .+ Run: svc keys cap \S+ <amount\|none>\n$/);
    expect(capped.stderr).toContain(`Run: svc keys cap ${minted.id} <amount|none>`);
    expect((await svc(['keys', 'cap', minted.id, 'none'], env)).code).toBe(0);
    expect((await svc(['chat', 'uncapped'], env)).code).toBe(0);

    const listed = json<{ id: string; spendCapWei: string | null; revokedAt: string | null }[]>(
      await svc(['keys', 'list', '--json'], env),
    );
    expect(listed).toEqual([expect.objectContaining({ id: minted.id, spendCapWei: null, revokedAt: null })]);

    // Delete refuses an active key (exit 5); revoke, then the saved key is refused (exit 3), then delete.
    const active = await svc(['keys', 'delete', minted.id], env);
    expect(active.code).toBe(5);
    expect(active.stderr).toMatch(/^svc: api_key_active: .+ Run: svc keys revoke <id>\n$/);
    expect((await svc(['keys', 'revoke', minted.id], env)).code).toBe(0);
    const revoked = await svc(['chat', 'after revoke', '--api-key', minted.key], env);
    expect(revoked.code).toBe(3);
    expect(revoked.stderr).toMatch(/^svc: invalid_api_key: /);
    expect((await svc(['keys', 'delete', minted.id], env)).code).toBe(0);
    expect(json<unknown[]>(await svc(['keys', 'list', '--json'], env))).toEqual([]);

    // svc usage still lists the deleted key's calls: the two answered, and the two refused 402
    // delegate_not_authorized once accepted (the wallet's payability is checked then), with no job and
    // no fee. The spend cap and the revoked key refused theirs before that: not listed. No other wallet's.
    const usage = await waitUntil(
      async () => json<UsageList>(await svc(['usage', '--json', '--key', minted.id], env)),
      (listed) =>
        listed.data.filter((call) => call.outcome === 'answered').length >= 2 &&
        listed.data.every((call) => call.outcome !== 'pending'),
      { what: "the deleted key's calls in svc usage", timeoutMs: 30_000, intervalMs: 1_000 },
    );
    expect(usage.data.map((call) => call.outcome)).toEqual([
      'answered',
      'answered',
      'delegate_not_authorized',
      'delegate_not_authorized',
    ]);
    expect(usage.data.every((call) => call.keyId === minted.id)).toBe(true);
    expect(usage.data.slice(2)).toEqual([
      expect.objectContaining({ jobId: null, txHash: null, feeWei: '0' }),
      expect.objectContaining({ jobId: null, txHash: null, feeWei: '0' }),
    ]);
    const everything = json<UsageList>(await svc(['usage', '--json'], env));
    expect(everything.data.map((call) => call.id)).toEqual(usage.data.map((call) => call.id));
    expect(everything.data.every((call) => call.payer === wallet.address)).toBe(true);

    // deposit() for calls paid per call.
    const deposited = await svc(['deposit', '1000000000000000', '--json'], env);
    expect(deposited.code).toBe(0);
    expect(json<{ prepaidBalanceWei: string }>(deposited).prepaidBalanceWei).toBe(
      (await registry.prepaidBalanceOf(wallet.address)).toString(),
    );

    // Usage errors are exit 2; after logout the key routes need a sign-in again.
    expect((await svc(['deposit', '1.5'], env)).code).toBe(2);
    expect((await svc(['logout'], env)).code).toBe(0);
    expect((await svc(['keys', 'list'], env)).code).toBe(3);
  }, 120_000);
});
