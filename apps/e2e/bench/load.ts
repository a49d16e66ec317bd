// Cost and capacity under load (issue 29): `npm start` (its devnet mines a block per transaction), WALLETS wallets each calling back to
// back through the gateway with the official `openai` client for SECONDS seconds, then, read from the chain
// and the calls of that window: completions per second, the median call, JobRegistry gas per completion
// (every JobRegistry transaction mined in the window, sessions and commitments included, over the jobs
// submitted in it; releases come after the 15-minute dispute window and are left out), blob gas per
// completion, KZG work per completion (read from the server's `svc_kzg_*` metrics: the orchestrator's
// commitments and proofs and the workers' commitment checks), and the jobs per submission transaction and
// per blob. Each figure beside the one measured on main before batching.
//
//   npm run bench:load -w @svc/e2e [-- --wallets 20 --seconds 30 --block-time 0 --linger 600ms --max-wait 600ms]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { JsonRpcProvider, Wallet, parseEther, type TransactionReceipt } from 'ethers';
import OpenAI from 'openai';
import { connectJobRegistry, jobRegistryInterface } from '@svc/contracts';
import { freePort } from '@svc/testkit/ports';
import { mintKey, signIn, Stack, type StackFile } from '../test/support/stack.js';

const { values } = parseArgs({
  options: {
    wallets: { type: 'string', default: '20' },
    seconds: { type: 'string', default: '30' },
    'block-time': { type: 'string', default: '0' },
    // Unset: the job-orchestrator's defaults (docs/configuration.md).
    linger: { type: 'string' },
    'max-wait': { type: 'string' },
  },
});
const walletCount = Number(values.wallets);
const seconds = Number(values.seconds);

/** Measured on main before batching (2bd9f92), the same load: issue 29. */
const BEFORE = {
  completionsPerSecond: 3.7,
  medianCallMs: 5_300,
  gasPerCompletion: 248_000,
  blobsPerCompletion: 1,
  // Each job had a blob of its own: the orchestrator's commitment and proof, the worker's commitment check.
  kzgOperationsPerCompletion: 3,
  // The issue's figures for those: about 65 ms in the orchestrator and 60 ms in the worker.
  kzgMsPerCompletion: 125,
};
const BLOB_GAS_PER_BLOB = 131_072n;

const median = (samples: number[]): number => {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};

/** The server's KZG work so far, from its Prometheus text: in all, and operations by kind. */
async function kzgWork(
  metricsUrl: string,
): Promise<{ operations: number; seconds: number; byOperation: Record<string, number> }> {
  const text = await (await fetch(metricsUrl)).text();
  const samples = (name: string) =>
    [...text.matchAll(new RegExp(`^${name}\\{operation="(\\w+)"\\} (\\S+)$`, 'gm'))].map(
      (match) => [match[1]!, Number(match[2])] as const,
    );
  const sum = (name: string) => samples(name).reduce((total, [, value]) => total + value, 0);
  return {
    operations: sum('svc_kzg_operations_total'),
    seconds: sum('svc_kzg_seconds_total'),
    byOperation: Object.fromEntries(samples('svc_kzg_operations_total')),
  };
}

const stateDir = mkdtempSync(join(tmpdir(), 'svc-load-'));
const port = await freePort();
const metricsUrl = `http://127.0.0.1:${await freePort()}/metrics`;
const base = `http://localhost:${port}`;
const stack = await Stack.start(
  {
    PORT: String(port),
    METRICS_PORT: new URL(metricsUrl).port,
    STATE_DIR: stateDir,
    DEVNET_PORT: '0',
    DEVNET_FILE: join(stateDir, 'devnet.json'),
    DEVNET_BLOCK_TIME: values['block-time'],
    ...(values.linger ? { SUBMIT_BATCH_LINGER: values.linger } : {}),
    ...(values['max-wait'] ? { SUBMIT_BATCH_MAX_WAIT: values['max-wait'] } : {}),
    // Enough session opens for every wallet's first call.
    SESSION_OPENS_PER_MINUTE: '120',
    SESSION_OPENS_UNPAID_PER_MINUTE: '120',
  },
  [],
  { timeoutMs: 600_000 },
);
try {
  const stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
  const model = stackFile.models[0]!;
  const provider = new JsonRpcProvider(stackFile.rpcUrl, undefined, { cacheTimeout: -1 });
  const registryAddress = stackFile.contracts.jobRegistry.toLowerCase();

  // Wallets: funded by a devnet account, deposited and authorized the service, signed in, a key each.
  process.stderr.write(`preparing ${walletCount} wallets…\n`);
  const funder = new Wallet(stackFile.accounts[0]!.privateKey, provider);
  let nonce = await provider.getTransactionCount(funder.address, 'pending');
  const wallets = Array.from({ length: walletCount }, () => Wallet.createRandom().connect(provider));
  await Promise.all(
    wallets.map(async (wallet) =>
      (await funder.sendTransaction({ to: wallet.address, value: parseEther('2'), nonce: nonce++ })).wait(),
    ),
  );
  await Promise.all(
    wallets.map(async (wallet) =>
      (
        await connectJobRegistry(stackFile.contracts.jobRegistry, wallet).depositAndAuthorize(
          stackFile.delegate!,
          {
            value: parseEther('1'),
          },
        )
      ).wait(),
    ),
  );
  const clients = await Promise.all(
    wallets.map(async (wallet) => {
      const { token } = await signIn(base, wallet);
      return new OpenAI({ apiKey: await mintKey(base, token), baseURL: `${base}/v1`, maxRetries: 0 });
    }),
  );
  const call = async (client: OpenAI, content: string) => {
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: 'user', content }],
      stream: true,
    });
    for await (const chunk of stream) void chunk;
  };
  // Warm up: every wallet's first call (sessions opened and claimed), outside the window.
  process.stderr.write('warming up…\n');
  await Promise.all(clients.map((client, index) => call(client, `hello from wallet ${index}`)));

  process.stderr.write(`${walletCount} wallets calling back to back for ${seconds} s…\n`);
  const startBlock = (await provider.getBlockNumber()) + 1;
  const kzgBefore = await kzgWork(metricsUrl);
  const started = performance.now();
  const deadline = started + seconds * 1_000;
  const durations: number[] = [];
  let failures = 0;
  /** Failed calls by HTTP status and error code. */
  const failureCodes = new Map<string, number>();
  await Promise.all(
    clients.map(async (client, index) => {
      for (let turn = 0; performance.now() < deadline; turn++) {
        const callStarted = performance.now();
        try {
          await call(client, `wallet ${index}, question ${turn}: what is ${index} + ${turn}?`);
          if (performance.now() <= deadline) durations.push(performance.now() - callStarted);
        } catch (error) {
          failures += 1;
          const { status, code } = error as { status?: number; code?: string };
          const key = `${status ?? 'no status'} ${code ?? (error as Error).message}`;
          failureCodes.set(key, (failureCodes.get(key) ?? 0) + 1);
        }
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1_000;
  // The commitments of the window's last answers land within a few blocks.
  await new Promise((resolve) => setTimeout(resolve, 3 * Number(values['block-time']) * 1_000 + 3_000));
  const endBlock = await provider.getBlockNumber();
  const kzgAfter = await kzgWork(metricsUrl);

  let gas = 0n;
  let blobGas = 0n;
  let jobs = 0;
  let submissionTransactions = 0;
  let submissionGas = 0n;
  let commitments = 0;
  let commitTransactions = 0;
  let commitGas = 0n;
  let blobs = 0;
  for (let number = startBlock; number <= endBlock; number++) {
    const block = await provider.getBlock(number);
    for (const hash of block?.transactions ?? []) {
      const receipt = (await provider.getTransactionReceipt(hash)) as TransactionReceipt;
      if (receipt.to?.toLowerCase() !== registryAddress) continue;
      gas += receipt.gasUsed;
      blobGas += receipt.blobGasUsed ?? 0n;
      const events = receipt.logs
        .filter((log) => log.address.toLowerCase() === registryAddress)
        .map((log) => jobRegistryInterface.parseLog(log)?.name);
      const submitted = events.filter((name) => name === 'JobSubmitted').length;
      const completed = events.filter((name) => name === 'JobCompleted').length;
      jobs += submitted;
      if (submitted > 0) {
        submissionTransactions += 1;
        submissionGas += receipt.gasUsed;
      }
      if (completed > 0) {
        commitments += completed;
        commitTransactions += 1;
        commitGas += receipt.gasUsed;
      }
      blobs += Number((receipt.blobGasUsed ?? 0n) / BLOB_GAS_PER_BLOB);
    }
  }
  provider.destroy();

  const completionsPerSecond = durations.length / elapsed;
  const medianCallMs = median(durations);
  const gasPerCompletion = jobs === 0 ? 0 : Number(gas) / jobs;
  const blobsPerCompletion = jobs === 0 ? 0 : Number(blobGas) / Number(BLOB_GAS_PER_BLOB) / jobs;
  const kzgOperationsPerCompletion = jobs === 0 ? 0 : (kzgAfter.operations - kzgBefore.operations) / jobs;
  const kzgMsPerCompletion = jobs === 0 ? 0 : ((kzgAfter.seconds - kzgBefore.seconds) * 1_000) / jobs;
  const rows = [
    ['completions per second', BEFORE.completionsPerSecond, completionsPerSecond, '≥ 10'],
    ['median call (ms)', BEFORE.medianCallMs, medianCallMs, '≤ 2,000'],
    ['JobRegistry gas per completion', BEFORE.gasPerCompletion, gasPerCompletion, '≤ 80,000'],
    ['blobs per completion', BEFORE.blobsPerCompletion, blobsPerCompletion, '≤ 0.125'],
    [
      'KZG operations per completion',
      BEFORE.kzgOperationsPerCompletion,
      kzgOperationsPerCompletion,
      '≤ 0.375',
    ],
    ['KZG thread ms per completion', BEFORE.kzgMsPerCompletion, kzgMsPerCompletion, '≤ 15.6'],
  ] as const;
  console.log(
    `${walletCount} wallets back to back for ${seconds} s at ${values['block-time']} s blocks, linger ${values.linger ?? 'default'}: ` +
      `${durations.length} calls answered in the window (${failures} failed${failures ? `: ${[...failureCodes].map(([key, count]) => `${key} ×${count}`).join(', ')}` : ''}), blocks ${startBlock}-${endBlock}`,
  );
  console.table(
    rows.map(([figure, before, now, target]) => ({
      figure,
      before: before.toLocaleString('en-US'),
      now: Number(now.toFixed(now < 10 ? 3 : 0)).toLocaleString('en-US'),
      'now ÷ before': (now / before).toFixed(2),
      target,
    })),
  );
  console.log(
    `${jobs} jobs in ${submissionTransactions} submission transactions (${(jobs / Math.max(1, submissionTransactions)).toFixed(1)} a transaction), ` +
      `${blobs} blobs (${(jobs / Math.max(1, blobs)).toFixed(1)} prompts a blob); ${gas.toLocaleString('en-US')} gas, ${blobGas.toLocaleString('en-US')} blob gas`,
  );
  const perJob = (total: bigint, count: number) => (count === 0 ? 0 : Number(total) / count).toFixed(0);
  console.log(
    `gas a job: ${perJob(submissionGas, jobs)} in submissions, ${perJob(commitGas, commitments)} in commitments ` +
      `(${commitments} in ${commitTransactions} transactions, ${(commitments / Math.max(1, commitTransactions)).toFixed(1)} a transaction); ` +
      `the rest (sessions opened and claimed) ${perJob(gas - submissionGas - commitGas, jobs)}`,
  );
  const kzgByOperation = Object.entries(kzgAfter.byOperation).map(
    ([operation, count]) => `${count - (kzgBefore.byOperation[operation] ?? 0)} ${operation}s`,
  );
  console.log(`KZG work in the window: ${kzgByOperation.join(', ')}`);
} finally {
  await stack.stopWithin(30_000);
  rmSync(stateDir, { recursive: true, force: true });
}
