// Latency of a streamed completion through the gateway, with the official `openai` client, by block time
// (issue 28): `npm start` with automine, then 2 s and 12 s blocks, each figure and its ratio to automine.
//
//   npm run bench:latency -w @svc/e2e [-- --calls 7 --block-times 0,2,12]
//
// Per chain: the demo wallet (deposited, delegate authorized) mints a key; one call warms its session;
// then `--calls` sequential streamed calls on that warm session, timed from the request to the first
// content delta and to the stream's last byte (medians). Then a wallet with no session yet (deposits,
// authorizes, signs in, mints a key) makes its first call, timed to its first delta.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { JsonRpcProvider, Wallet } from 'ethers';
import OpenAI from 'openai';
import { connectJobRegistry } from '@svc/contracts';
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
  newWalletFirstDeltaMs: number;
}

const median = (samples: number[]): number => {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** One streamed call: ms to the first content delta and to the end of the stream. */
async function timedCall(
  client: OpenAI,
  model: string,
  content: string,
): Promise<{ firstDelta: number; lastByte: number }> {
  const started = performance.now();
  let firstDelta: number | undefined;
  const stream = await client.chat.completions.create({
    model,
    messages: [{ role: 'user', content }],
    stream: true,
  });
  for await (const chunk of stream) {
    if (firstDelta === undefined && chunk.choices[0]?.delta?.content)
      firstDelta = performance.now() - started;
  }
  const lastByte = performance.now() - started;
  if (firstDelta === undefined) throw new Error('the stream carried no content');
  return { firstDelta, lastByte };
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

    const demo = new Wallet(stackFile.demoWallet!.privateKey, provider);
    const client = await clientFor(demo);
    await call(client, 'warm the session up');
    const firsts: number[] = [];
    const lasts: number[] = [];
    for (let index = 0; index < calls; index++) {
      const { firstDelta, lastByte } = await call(client, `call ${index}`);
      firsts.push(firstDelta);
      lasts.push(lastByte);
    }

    // A wallet with no session: it deposits and authorizes the delegate, signs in and mints a key.
    const fresh = new Wallet(stackFile.accounts.at(-1)!.privateKey, provider);
    const registry = connectJobRegistry(stackFile.contracts.jobRegistry, fresh);
    await (await registry.depositAndAuthorize(stackFile.delegate!, { value: 10n ** 17n })).wait();
    const freshClient = await clientFor(fresh);
    const { firstDelta: newWallet } = await call(freshClient, 'my first call');
    provider.destroy();
    return { firstDeltaMs: median(firsts), lastByteMs: median(lasts), newWalletFirstDeltaMs: newWallet };
  } finally {
    await stack.stopWithin(30_000);
    rmSync(stateDir, { recursive: true, force: true });
  }
}

const results = new Map<number, Figures>();
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
    'new wallet first delta (ms)': Math.round(figures.newWalletFirstDeltaMs),
    'new wallet ÷ automine': ratio('newWalletFirstDeltaMs'),
  };
});
console.table(rows);
