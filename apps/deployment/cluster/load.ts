// The load: wallets calling through the gateways' Service with the official `openai` client, streamed and
// whole, paid with an API key (the delegate path) or per call (x402), each call recorded with its outcome.
import { paymentSignatureForAnswer } from '@svc/x402';
import { Wallet, type JsonRpcProvider } from 'ethers';
import OpenAI, { APIError } from 'openai';
import { connectJobRegistry } from '@svc/contracts';

export type Payment = 'key' | 'x402';
export type Outcome = 'answered' | 'refused' | 'failed';

export interface CallRecord {
  readonly wallet: string;
  readonly keyId?: string;
  readonly payment: Payment;
  readonly stream: boolean;
  readonly startedAt: number;
  endedAt: number;
  outcome: Outcome;
  /** The HTTP status and error code of a refusal or failure, or the client error's name. */
  code?: string;
  jobId?: string;
  /** The phase (fault) the call started in. */
  phase: string;
}

export interface LoadWallet {
  readonly wallet: Wallet;
  readonly clientAddress: string;
  key?: string;
  keyId?: string;
  capWei?: bigint;
}

const MODEL = 'qwen2.5:0.5b';

export class Load {
  readonly calls: CallRecord[] = [];
  phase = 'warm-up';
  private running = false;
  private loops: Promise<void>[] = [];

  constructor(
    private readonly baseUrl: string,
    readonly wallets: LoadWallet[],
  ) {}

  /** Funds each wallet, deposits into JobRegistry authorizing the service signer, signs in, mints a key. */
  static async prepare(options: {
    baseUrl: string;
    provider: JsonRpcProvider;
    jobRegistry: string;
    serviceSigner: string;
    count: number;
    depositWei: bigint;
    capWei: (index: number) => bigint | undefined;
  }): Promise<Load> {
    const wallets: LoadWallet[] = [];
    for (let index = 0; index < options.count; index++) {
      const wallet = Wallet.createRandom().connect(options.provider) as unknown as Wallet;
      await options.provider.send('anvil_setBalance', [wallet.address, '0x56BC75E2D63100000']); // 100 ETH
      wallets.push({ wallet, clientAddress: `10.77.0.${index + 1}` });
    }
    await Promise.all(
      wallets.map(async ({ wallet }) => {
        const registry = connectJobRegistry(options.jobRegistry, wallet);
        const sent = await registry.depositAndAuthorize(options.serviceSigner, { value: options.depositWei });
        await sent.wait();
      }),
    );
    const load = new Load(options.baseUrl, wallets);
    await Promise.all(
      wallets.map(async (entry, index) => {
        const token = await load.signIn(entry);
        const cap = options.capWei(index);
        const mint = await fetch(`${options.baseUrl}/api/api-keys`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${token}`,
            'content-type': 'application/json',
            'x-forwarded-for': entry.clientAddress,
          },
          body: JSON.stringify({ name: 'cluster', spendCapWei: cap === undefined ? null : cap.toString() }),
        });
        if (mint.status !== 201)
          throw new Error(`minting a key answered ${mint.status}: ${await mint.text()}`);
        const minted = (await mint.json()) as { key: string; id: string };
        entry.key = minted.key;
        entry.keyId = minted.id;
        entry.capWei = cap;
      }),
    );
    return load;
  }

  private async signIn(entry: LoadWallet): Promise<string> {
    const headers = { 'x-forwarded-for': entry.clientAddress };
    const challenge = await fetch(`${this.baseUrl}/api/auth/challenge?address=${entry.wallet.address}`, {
      headers,
    });
    if (challenge.status !== 200)
      throw new Error(`challenge answered ${challenge.status}: ${await challenge.text()}`);
    const { message } = (await challenge.json()) as { message: string };
    const verify = await fetch(`${this.baseUrl}/api/auth/verify`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ message, signature: await entry.wallet.signMessage(message) }),
    });
    if (verify.status !== 200) throw new Error(`verify answered ${verify.status}: ${await verify.text()}`);
    return ((await verify.json()) as { token: string }).token;
  }

  /** Every wallet calls in a loop, one call at a time, until `stop`. */
  start(): void {
    this.running = true;
    this.loops = this.wallets.map((entry, index) => this.loop(entry, index));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private async loop(entry: LoadWallet, index: number): Promise<void> {
    let turn = index;
    while (this.running) {
      const payment: Payment = turn % 4 === 3 ? 'x402' : 'key';
      const stream = turn % 2 === 0;
      turn++;
      const { outcome } = await this.call(entry, payment, stream);
      // A client backs off when refused (429s carry retry-after; a 402 or 503 will not clear at once).
      const pause = outcome === 'answered' ? 200 : 2_000;
      await new Promise((resolve) => setTimeout(resolve, pause + Math.random() * 400));
    }
  }

  /** One call; resolves when it ended, recording how. `requestId`: its `x-request-id`, to find its trace. */
  async call(entry: LoadWallet, payment: Payment, stream: boolean, requestId?: string): Promise<CallRecord> {
    const record: CallRecord = {
      wallet: entry.wallet.address,
      keyId: payment === 'key' ? entry.keyId : undefined,
      payment,
      stream,
      startedAt: Date.now(),
      endedAt: 0,
      outcome: 'failed',
      phase: this.phase,
    };
    this.calls.push(record);
    const body = {
      model: MODEL,
      messages: [
        {
          role: 'user' as const,
          content: `hello from ${entry.wallet.address.slice(0, 10)} ${record.startedAt}`,
        },
      ],
    };
    try {
      const requestHeaders: Record<string, string> = requestId ? { 'x-request-id': requestId } : {};
      let client: OpenAI;
      if (payment === 'key') client = this.client(entry.key!, entry.clientAddress, requestHeaders);
      else {
        const refused = await fetch(`${this.baseUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': entry.clientAddress },
          body: JSON.stringify(body),
        });
        await refused.arrayBuffer();
        if (refused.status !== 402) {
          record.outcome = refused.status >= 500 ? 'failed' : 'refused';
          record.code = `${refused.status}`;
          return record;
        }
        const signature = await paymentSignatureForAnswer(entry.wallet, refused.headers);
        client = this.client(undefined, entry.clientAddress, {
          ...requestHeaders,
          'payment-signature': signature,
        });
      }
      let service: { job_id?: string } | undefined;
      let text = '';
      if (stream) {
        const chunks = await client.chat.completions.create({ ...body, stream: true });
        for await (const chunk of chunks) {
          text += chunk.choices[0]?.delta?.content ?? '';
          service ??= (chunk as unknown as { service?: { job_id?: string } }).service;
        }
      } else {
        const completion = await client.chat.completions.create(body);
        text = completion.choices[0]?.message?.content ?? '';
        service = (completion as unknown as { service?: { job_id?: string } }).service;
      }
      if (!text) throw new Error('an empty answer');
      record.outcome = 'answered';
      record.jobId = service?.job_id;
    } catch (error) {
      if (error instanceof APIError && error.status !== undefined) {
        const code = (error.code ?? (error.error as { code?: string } | undefined)?.code ?? '') as string;
        record.code = `${error.status} ${code}`.trim();
        record.outcome = error.status >= 500 && error.status !== 503 ? 'failed' : 'refused';
      } else if (error instanceof APIError) {
        // An error event inside the stream, after the first byte.
        record.code = `stream ${(error.error as { code?: string } | undefined)?.code ?? error.message}`;
        record.outcome = 'failed';
      } else {
        // The client's own error: the connection closed under it, say (`TypeError: terminated`).
        record.code = `${(error as Error).name}: ${(error as Error).message}`.slice(0, 60);
        record.outcome = 'failed';
      }
    } finally {
      record.endedAt = Date.now();
    }
    return record;
  }

  private client(key: string | undefined, clientAddress: string, headers: Record<string, string>): OpenAI {
    return new OpenAI({
      apiKey: key ?? 'unused',
      baseURL: `${this.baseUrl}/v1`,
      maxRetries: 0,
      timeout: 180_000,
      defaultHeaders: {
        'x-forwarded-for': clientAddress,
        ...headers,
        // A per-call payment carries no key.
        ...(key === undefined ? { authorization: null as unknown as string } : {}),
      },
    });
  }
}
