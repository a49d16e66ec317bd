// Latency of a streamed completion through the gateway, with the official `openai` client, by block time
// (issue 28): `npm start` with automine, then 2 s and 12 s blocks, each figure and its ratio to automine.
//
//   npm run bench:latency -w @svc/e2e [-- --calls 7 --block-times 0,2,12]
//
// Per chain: the demo wallet (deposited, delegate authorized) mints a key; one call warms the service up;
// then `--calls` streamed calls, each once the last one's job is mined (a user reading the answer), timed from the request to the first content delta and to the
// stream's last byte (medians), and the last byte's overhead over the model's own generation time (the
// built-in model at `npm start`'s 50 tokens/s, timed here on the same messages without any chain). Then a
// new wallet (deposits, authorizes, signs in, mints a key) makes its first call, timed to its first delta.
// The targets (docs/architecture.md, The fast path): first delta 400 ms at most, last byte at most the
// generation time plus 300 ms, a new wallet's first delta 1.5 s at most at 2 s blocks; automine no slower.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { JsonRpcProvider, Wallet } from 'ethers';
import OpenAI from 'openai';
import { connectJobRegistry } from '@svc/contracts';
import { DeterministicModel } from '@svc/worker';
// The port helper alone: the testkit's index loads jest's globals, which a script outside jest cannot.
import { freePort } from '@svc/testkit/ports';
import { mintKey, signIn, Stack, type StackFile } from '../test/support/stack.js';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '7' },
    'block-times': { type: 'string', default: '0,2,12' },
  },
});
const calls = Number(values.calls);
const blockTimes = values['block-times'].split(',').map(Number);

interface Figures {
  firstDeltaMs: number;
  lastByteMs: number;
  lastByteOverGenerationMs: number;
  newWalletFirstDeltaMs: number;
}

/** `npm start`'s worker: the built-in model at its default pace. */
const model = new DeterministicModel({ models: ['bench'], tokensPerSecond: 50 });

/** How long the model itself takes to generate the answer to `content`, with no service around it. */
async function generationMs(content: string): Promise<number> {
  const started = performance.now();
  const request = {
    model: 'bench',
    messages: [{ role: 'user' as const, content }],
    signal: new AbortController().signal,
  };
  for await (const event of model.generate(request as Parameters<DeterministicModel['generate']>[0]))
    void event;
  return performance.now() - started;
}

const median = (samples: number[]): number => {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** One streamed call: ms to the first content delta and to the end of the stream, and its job's transaction. */
async function timedCall(
  client: OpenAI,
  model: string,
  content: string,
): Promise<{ firstDelta: number; lastByte: number; txHash: string }> {
  const started = performance.now();
  let firstDelta: number | undefined;
  const { data: stream, response } = await client.chat.completions
    .create({ model, messages: [{ role: 'user', content }], stream: true })
    .withResponse();
  for await (const chunk of stream) {
    if (firstDelta === undefined && chunk.choices[0]?.delta?.content)
      firstDelta = performance.now() - started;
  }
  const lastByte = performance.now() - started;
  if (firstDelta === undefined) throw new Error('the stream carried no content');
  const service = JSON.parse(response.headers.get('x-service') ?? '{}') as { tx_hash?: string };
  return { firstDelta, lastByte, txHash: service.tx_hash ?? '' };
}

async function measure(blockTime: number): Promise<Figures> {
  const stateDir = mkdtempSync(join(tmpdir(), 'svc-latency-'));
  const port = await freePort();
  const base = `http://localhost:${port}`;
  const stack = await Stack.start(
    {
      PORT: String(port),
      STATE_DIR: stateDir,
      DEVNET_PORT: '0',
      DEVNET_FILE: join(stateDir, 'devnet.json'),
      DEVNET_BLOCK_TIME: String(blockTime),
    },
    [],
    { timeoutMs: 600_000 },
  );
  try {
    const stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
    const model = stackFile.models[0]!;
    const provider = new JsonRpcProvider(stackFile.rpcUrl, undefined, { cacheTimeout: -1 });
    const clientFor = async (wallet: Wallet) => {
      const { token } = await signIn(base, wallet);
      return new OpenAI({ apiKey: await mintKey(base, token), baseURL: `${base}/v1`, maxRetries: 0 });
    };
    const call = (client: OpenAI, content: string) =>
      timedCall(client, model, content).catch((error: unknown) => {
        throw new Error(`call at ${blockTime} s blocks failed`, { cause: error });
      });

    // The next call comes once the last one's job is mined, as a user's next message after reading the
    // answer: a session is busy until its job lands, so calls back to back at long block times would each
    // take (or open) another session instead of the warm one.
    const landed = (txHash: string) => provider.waitForTransaction(txHash, 1, 120_000);
    const demo = new Wallet(stackFile.demoWallet!.privateKey, provider);
    const client = await clientFor(demo);
    await landed((await call(client, 'warm the session up')).txHash);
    const firsts: number[] = [];
    const lasts: number[] = [];
    const overheads: number[] = [];
    for (let index = 0; index < calls; index++) {
      const content = `call ${index}`;
      const { firstDelta, lastByte, txHash } = await call(client, content);
      await landed(txHash);
      firsts.push(firstDelta);
      lasts.push(lastByte);
      overheads.push(lastByte - (await generationMs(content)));
    }

    // A wallet with no session: it deposits and authorizes the delegate, signs in and mints a key.
    const fresh = new Wallet(stackFile.accounts.at(-1)!.privateKey, provider);
    const registry = connectJobRegistry(stackFile.contracts.jobRegistry, fresh);
    await (await registry.depositAndAuthorize(stackFile.delegate!, { value: 10n ** 17n })).wait();
    const freshClient = await clientFor(fresh);
    const { firstDelta: newWallet } = await call(freshClient, 'my first call');
    provider.destroy();
    samples.set(blockTime, { firsts, lasts });
    return {
      firstDeltaMs: median(firsts),
      lastByteMs: median(lasts),
      lastByteOverGenerationMs: median(overheads),
      newWalletFirstDeltaMs: newWallet,
    };
  } finally {
    await stack.stopWithin(30_000);
    rmSync(stateDir, { recursive: true, force: true });
  }
}

const results = new Map<number, Figures>();
const samples = new Map<number, { firsts: number[]; lasts: number[] }>();
for (const blockTime of blockTimes) {
  process.stderr.write(`measuring with ${blockTime === 0 ? 'automine' : `${blockTime} s blocks`}…\n`);
  results.set(blockTime, await measure(blockTime));
}

const automine = results.get(0);
const rows = [...results].map(([blockTime, figures]) => {
  const ratio = (key: keyof Figures) => (automine ? (figures[key] / automine[key]).toFixed(2) : 'n/a');
  return {
    chain: blockTime === 0 ? 'automine' : `${blockTime} s blocks`,
    'first delta (median, ms)': Math.round(figures.firstDeltaMs),
    'first delta ÷ automine': ratio('firstDeltaMs'),
    'last byte (median, ms)': Math.round(figures.lastByteMs),
    'last byte ÷ automine': ratio('lastByteMs'),
    'last byte − generation (median, ms)': Math.round(figures.lastByteOverGenerationMs),
    'new wallet first delta (ms)': Math.round(figures.newWalletFirstDeltaMs),
    'new wallet ÷ automine': ratio('newWalletFirstDeltaMs'),
  };
});
console.table(rows);
for (const [blockTime, { firsts, lasts }] of samples) {
  const round = (values: number[]) => values.map((value) => Math.round(value)).join(' ');
  console.log(
    `${blockTime === 0 ? 'automine' : `${blockTime} s blocks`}: first deltas ${round(firsts)} ms; last bytes ${round(lasts)} ms`,
  );
}
