import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { JsonRpcProvider, Wallet, type HDNodeWallet } from 'ethers';
import OpenAI from 'openai';
import { connectJobRegistry } from '@svc/contracts';
import { paymentResponseOf, paymentSignatureForAnswer, prepaidDebitRequirementsOf } from '@svc/x402';
import { isProcessAlive } from '@svc/anvil';
import { freePort } from '@svc/testkit';

// `npm start` as a user runs it: the real start script in its own process, with nothing configured,
// so every dependency is the embedded one (PGlite, memory store, in-process bus, devnet), driven over
// HTTP by a real wallet. Keys and chain state survive a restart; `--reset` clears them.

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

interface DevnetFile {
  rpcUrl: string;
  chainId: number;
  anvilPid: number;
  contracts: { jobRegistry: string; workerRegistry: string };
  models: Array<{ name: string; feeWei: string }>;
  accounts: Array<{ role: string; address: string }>;
}

interface StackFile {
  gatewayUrl: string;
  rpcUrl: string;
  chainId: number;
  contracts: { jobRegistry: string; workerRegistry: string };
  delegate: string;
  facilitator: string | null;
  models: string[];
  accounts: Array<{ address: string; privateKey: string }>;
}

interface DelegateOption {
  scheme: 'delegate';
  transaction: { to: string; data: string; value: string; chainId: number };
}

async function rpc(rpcUrl: string, method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await response.json()) as { result?: unknown }).result;
}

/** One `npm start` process; `stop` sends SIGTERM and resolves with its exit code. */
class Stack {
  private output = '';
  private constructor(private readonly child: ChildProcess) {
    child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
  }

  static async start(env: Record<string, string>, args: string[] = []): Promise<Stack> {
    const stack = new Stack(
      spawn(process.execPath, ['scripts/start.mjs', ...args], {
        cwd: repoRoot,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'info', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    const deadline = Date.now() + 90_000;
    while (!stack.output.includes('"msg":"all started"')) {
      if (stack.child.exitCode !== null) throw new Error(`npm start exited early:\n${stack.output}`);
      if (Date.now() > deadline) throw new Error(`npm start did not start in time:\n${stack.output}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return stack;
  }

  get logs(): string {
    return this.output;
  }

  async stop(): Promise<number | null> {
    if (this.child.exitCode !== null) return this.child.exitCode;
    const exited = new Promise<number | null>((resolve) => this.child.once('exit', (code) => resolve(code)));
    this.child.kill('SIGTERM');
    return exited;
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

async function signInAndMint(
  base: string,
  wallet: HDNodeWallet | Wallet,
  spendCapWei: string | null = '1000',
): Promise<string> {
  const challenge = await fetch(`${base}/api/auth/challenge?address=${wallet.address}`);
  expect(challenge.status).toBe(200);
  const { message } = (await challenge.json()) as { message: string };
  expect(message).toContain(`URI: ${base}`);
  const verify = await fetch(`${base}/api/auth/verify`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ message, signature: await wallet.signMessage(message) }),
  });
  expect(verify.status).toBe(200);
  const { token } = (await verify.json()) as { token: string };
  const mint = await fetch(`${base}/api/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'e2e', ...(spendCapWei === null ? {} : { spendCapWei }) }),
  });
  expect(mint.status).toBe(201);
  return ((await mint.json()) as { key: string }).key;
}

const modelsStatus = async (base: string, key: string) =>
  (await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status;

describe('npm start (all-in-one, embedded defaults)', () => {
  let stateDir: string;
  let base: string;
  let env: Record<string, string>;
  let stack: Stack | undefined;
  let key: string;
  let firstRun: { devnet: DevnetFile; blockNumber: bigint };

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'svc-e2e-state-'));
    const port = await freePort();
    base = `http://localhost:${port}`;
    env = {
      PORT: String(port),
      STATE_DIR: stateDir,
      DEVNET_PORT: '0',
      DEVNET_FILE: join(stateDir, 'devnet.json'),
    };
    stack = await Stack.start(env);
  }, 120_000);

  afterAll(async () => {
    stack?.kill();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('runs the devnet, the services and two registered workers with nothing configured', async () => {
    const devnet = JSON.parse(readFileSync(join(stateDir, 'devnet.json'), 'utf8')) as DevnetFile;
    expect(isProcessAlive(devnet.anvilPid)).toBe(true);
    expect(Number(await rpc(devnet.rpcUrl, 'eth_chainId', []))).toBe(devnet.chainId);
    expect(devnet.models.map((model) => model.name)).toEqual(['llama3.2:1b', 'qwen2.5:0.5b']);
    const workers = devnet.accounts.filter((account) => account.role === 'worker');
    expect(workers).toHaveLength(2);
    for (const worker of workers) {
      // WorkerRegistry.isActive(worker)
      const data = `0x9f8a13d7${worker.address.slice(2).toLowerCase().padStart(64, '0')}`;
      const result = await rpc(devnet.rpcUrl, 'eth_call', [
        { to: devnet.contracts.workerRegistry, data },
        'latest',
      ]);
      expect(BigInt(String(result))).toBe(1n);
    }
    expect(stack!.logs).toContain('using the embedded PostgreSQL (PGlite)');
    expect(existsSync(join(stateDir, 'postgres'))).toBe(true);
    firstRun = { devnet, blockNumber: BigInt(String(await rpc(devnet.rpcUrl, 'eth_blockNumber', []))) };
  });

  it('signs a wallet in and mints a key that works on /v1', async () => {
    key = await signInAndMint(base, Wallet.createRandom());
    expect(await modelsStatus(base, key)).toBe(200);
  });

  it('writes stack.json with the gateway, the chain, the delegate and wallets without a delegate', () => {
    const stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
    const devnet = firstRun.devnet;
    const signer = devnet.accounts.find((account) => account.role === 'service-signer')!;
    expect(stackFile).toEqual({
      gatewayUrl: base,
      rpcUrl: devnet.rpcUrl,
      chainId: devnet.chainId,
      contracts: {
        jobRegistry: devnet.contracts.jobRegistry,
        workerRegistry: devnet.contracts.workerRegistry,
      },
      delegate: signer.address,
      facilitator: devnet.accounts.find((account) => account.role === 'facilitator')!.address,
      models: ['llama3.2:1b', 'qwen2.5:0.5b'],
      accounts: expect.any(Array),
    });
    // User wallets 2 and 3: wallet 1 has deposited and authorized the signer already.
    const wallets = devnet.accounts.filter((account) => account.role === 'wallet');
    expect(stackFile.accounts.map((account) => account.address)).toEqual(
      wallets.slice(1).map((account) => account.address),
    );
    for (const account of stackFile.accounts)
      expect(new Wallet(account.privateKey).address).toBe(account.address);
  });

  it('serves the official openai client: 402 until the wallet sends the accepts transaction, then answers', async () => {
    const stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
    const provider = new JsonRpcProvider(stackFile.rpcUrl, stackFile.chainId, { staticNetwork: true });
    try {
      const wallet = new Wallet(stackFile.accounts[0]!.privateKey, provider);
      const client = new OpenAI({ apiKey: await signInAndMint(base, wallet, null), baseURL: `${base}/v1` });
      const model = stackFile.models[0]!;

      const refused = await client.chat.completions
        .create({ model, messages: [{ role: 'user', content: 'hi' }] })
        .catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(OpenAI.APIError);
      const refusal = refused as InstanceType<typeof OpenAI.APIError>;
      expect(refusal.status).toBe(402);
      expect(refusal.code).toBe('delegate_not_authorized');
      const accepts = (refusal.error as { accepts: DelegateOption[] }).accepts;
      expect(accepts[0]).toMatchObject({
        scheme: 'delegate',
        chain_id: stackFile.chainId,
        delegate: stackFile.delegate,
      });
      // This server takes per-call payments too: the prepaid-debit entry follows, also in PAYMENT-REQUIRED.
      const perCall = prepaidDebitRequirementsOf(refusal.headers!);
      expect(perCall).toMatchObject({ scheme: 'prepaid-debit', payTo: stackFile.delegate });
      expect(accepts[1]).toEqual(perCall);
      const pay = async (option: DelegateOption) => {
        const { to, data, value } = option.transaction;
        await (await wallet.sendTransaction({ to, data, value: BigInt(value) })).wait();
      };
      // The transaction as listed covers the refused job: one call.
      await pay(accepts[0]!);

      const stream = await client.chat.completions.create({
        model,
        messages: [{ role: 'user', content: 'stream me' }],
        stream: true,
      });
      let text = '';
      let service: Record<string, unknown> | undefined;
      for await (const chunk of stream) {
        text += chunk.choices[0]?.delta?.content ?? '';
        service ??= (chunk as unknown as { service?: Record<string, unknown> }).service;
      }
      expect(text).toMatch(/^You said: stream me \[conversation [0-9a-f]{16}\]$/);
      expect(service).toMatchObject({ job_id: expect.any(String), session_id: expect.any(String) });

      // That used the balance up: the same transaction, sent again, tops it up.
      const empty = (await client.chat.completions
        .create({ model, messages: [{ role: 'user', content: 'again' }] })
        .catch((error: unknown) => error)) as InstanceType<typeof OpenAI.APIError>;
      expect(empty.status).toBe(402);
      expect(empty.code).toBe('insufficient_balance');
      await pay((empty.error as { accepts: DelegateOption[] }).accepts[0]!);

      const { data, response } = await client.chat.completions
        .create({ model, messages: [{ role: 'user', content: 'all at once' }] })
        .withResponse();
      expect(data.choices[0]!.message.content).toMatch(/^You said: all at once /);
      const header = JSON.parse(response.headers.get('x-service')!) as Record<string, unknown>;
      expect(header).toEqual((data as unknown as { service: Record<string, unknown> }).service);
      // The job is on chain: JobRegistry.getJob(job_id) names the wallet as payer.
      const registry = connectJobRegistry(stackFile.contracts.jobRegistry, provider);
      const job = await registry.getJob(BigInt(header.job_id as string));
      expect(job.payer).toBe(wallet.address);
    } finally {
      provider.destroy();
    }
  }, 60_000);

  it('takes a keyless call paid per call: 402 with the requirements, then an answer debited exactly once', async () => {
    const stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
    const provider = new JsonRpcProvider(stackFile.rpcUrl, stackFile.chainId, { staticNetwork: true });
    try {
      const wallet = new Wallet(stackFile.accounts[1]!.privateKey, provider);
      const registry = connectJobRegistry(stackFile.contracts.jobRegistry, wallet);
      await (await registry.deposit({ value: 10n ** 16n })).wait();
      const call = (headers: Record<string, string>) =>
        fetch(`${base}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({
            model: stackFile.models[0],
            messages: [{ role: 'user', content: 'pay per call' }],
          }),
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
        service: { tx_hash: string };
      };
      expect(answer.choices[0]!.message.content).toMatch(/^You said: pay per call /);
      const settlement = paymentResponseOf(paid.headers);
      expect(settlement).toEqual({
        success: true,
        transaction: answer.service.tx_hash,
        network: `eip155:${stackFile.chainId}`,
        payer: wallet.address,
        amount: requirements.amount,
      });
      expect(before - (await registry.prepaidBalanceOf(wallet.address))).toBe(BigInt(requirements.amount));

      // The same payment again is refused as used, and charges nothing more.
      const replayed = await call({ 'payment-signature': paymentSignature });
      expect(replayed.status).toBe(402);
      expect(((await replayed.json()) as { error: { code: string } }).error.code).toBe(
        'invalid_prepaid_debit_payload_nonce_used',
      );
      expect(before - (await registry.prepaidBalanceOf(wallet.address))).toBe(BigInt(requirements.amount));
    } finally {
      provider.destroy();
    }
  }, 60_000);

  it('streams a call paid per call, and holds a payer to one call in flight: the refused one pays nothing', async () => {
    const stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
    const provider = new JsonRpcProvider(stackFile.rpcUrl, stackFile.chainId, { staticNetwork: true });
    try {
      const wallet = Wallet.createRandom().connect(provider);
      const funder = new Wallet(stackFile.accounts[1]!.privateKey, provider);
      await (await funder.sendTransaction({ to: wallet.address, value: 10n ** 17n })).wait();
      const registry = connectJobRegistry(stackFile.contracts.jobRegistry, wallet);
      await (await registry.deposit({ value: 10n ** 16n })).wait();
      const call = (headers: Record<string, string>, content: string, stream = false) =>
        fetch(`${base}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ model: stackFile.models[0], messages: [{ role: 'user', content }], stream }),
        });
      const required = await call({}, 'price?');
      const fee = BigInt(prepaidDebitRequirementsOf(required.headers)!.amount);
      const before = await registry.prepaidBalanceOf(wallet.address);

      const streamed = await call(
        { 'payment-signature': await paymentSignatureForAnswer(wallet, required.headers) },
        'stream per call',
        true,
      );
      expect(streamed.status).toBe(200);
      expect(streamed.headers.get('content-type')).toContain('text/event-stream');
      const settlement = paymentResponseOf(streamed.headers)!;
      const service = JSON.parse(streamed.headers.get('x-service')!) as { tx_hash: string };
      expect(settlement).toMatchObject({
        success: true,
        transaction: service.tx_hash,
        amount: fee.toString(),
      });
      const events = (await streamed.text()).trimEnd().split('\n\n');
      expect(events.at(-1)).toBe('data: [DONE]');
      const text = events
        .slice(0, -1)
        .map(
          (event) =>
            JSON.parse(event.replace(/^data: /, '')) as { choices: { delta: { content?: string } }[] },
        )
        .map((chunk) => chunk.choices[0]?.delta.content ?? '')
        .join('');
      expect(text).toMatch(/^You said: stream per call /);
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
      const statuses = answers.map((answer) => answer.status).sort();
      expect(statuses).toEqual([200, 429]);
      const refused = answers.find((answer) => answer.status === 429)!;
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe(
        'concurrency_limit_exceeded',
      );
      expect(refused.headers.get('retry-after')).toMatch(/^[0-9]+$/);
      expect(before - (await registry.prepaidBalanceOf(wallet.address))).toBe(2n * fee);
    } finally {
      provider.destroy();
    }
  }, 60_000);

  it('stops cleanly on SIGTERM, its devnet with it', async () => {
    expect(await stack!.stop()).toBe(0);
    expect(stack!.logs).not.toMatch(/"level":(50|60)/);
    expect(isProcessAlive(firstRun.devnet.anvilPid)).toBe(false);
    expect(existsSync(join(stateDir, 'devnet.json'))).toBe(false);
  }, 30_000);

  it('keeps keys and chain state across a restart', async () => {
    stack = await Stack.start(env);
    expect(stack.logs).toContain('devnet resumed from its kept state');
    const devnet = JSON.parse(readFileSync(join(stateDir, 'devnet.json'), 'utf8')) as DevnetFile;
    expect(devnet.contracts).toEqual(firstRun.devnet.contracts);
    expect(BigInt(String(await rpc(devnet.rpcUrl, 'eth_blockNumber', [])))).toBeGreaterThanOrEqual(
      firstRun.blockNumber,
    );
    expect(await modelsStatus(base, key)).toBe(200);
    expect(await stack.stop()).toBe(0);
  }, 120_000);

  it('starts from scratch with --reset', async () => {
    stack = await Stack.start(env, ['--reset']);
    expect(stack.logs).toContain('state reset: starting from scratch');
    expect(stack.logs).toContain('"msg":"devnet deployed"');
    expect(await modelsStatus(base, key)).toBe(401);
    expect(await stack.stop()).toBe(0);
  }, 120_000);
});
