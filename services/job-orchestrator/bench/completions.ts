// npm run bench -w @svc/job-orchestrator: where a completion's time goes, on one anvil (automine) with
// two reference workers on the built-in model (no pacing). All figures come from this one run.
//  1. CPU cost of one submission on a warm session: envelope and encryption, blob and KZG, signing.
//  2. Latency on a warm pooled session: request in -> job mined, -> first delta, -> completed.
//  3. A call paid per call (x402) against the same call with a key: verification, settlement, the whole
//     call, and their ratio to the delegate path's.
//  4. Sustained completions per second with 20 wallets calling concurrently.
import { performance } from 'node:perf_hooks';
import { Transaction, Wallet, parseEther } from 'ethers';
import {
  blobSidecarOf,
  commitmentOf,
  encodeBlob,
  kzg,
  loadKzgTrustedSetup,
  proofOf,
  SessionKeyPair,
  signTransaction,
} from '@svc/chain';
import { MemoryStore } from '@svc/platform';
import { JobLifecycleKind } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
// The devnet alone: the testkit's index loads jest's globals, which a script outside jest cannot.
import { startTestDevnet, type Devnet } from '@svc/testkit/test-devnet';
import { preparePrompt, sealPrompt } from '../src/completions/prompt-envelope.js';
import {
  completionRequest,
  preparePerCallAccounts,
  prepareServiceAccounts,
  startCompletionStack,
  type CompletionStack,
} from '../test/support/completion-stack.js';
import {
  depositedWallet,
  perCallRequest,
  signedPayment,
  verifiedPayment,
} from '../test/support/per-call-payments.js';
import { DEPLOYED_MODELS } from '../test/support/models.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 15);
const LATENCY_CALLS = Number(process.env.BENCH_CALLS ?? 20);
const WALLETS = 20;
const THROUGHPUT_SECONDS = Number(process.env.BENCH_SECONDS ?? 20);

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

function line(label: string, ms: number, note = ''): void {
  console.log(`${label.padEnd(58)} ${ms.toFixed(1).padStart(8)} ms ${note}`);
}

async function timed(run: () => unknown | Promise<unknown>): Promise<number> {
  await run();
  const samples: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const started = performance.now();
    await run();
    samples.push(performance.now() - started);
  }
  return median(samples);
}

async function cpuBreakdown(): Promise<void> {
  console.log('\n1. CPU of one submission (median of 15)');
  loadKzgTrustedSetup();
  const session = SessionKeyPair.generate();
  const binding = {
    chainId: 31337n,
    jobRegistry: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
    sessionId: 1n,
  };
  const conversation = [
    { role: 'system' as const, content: 'You are terse.' },
    { role: 'user' as const, content: 'x'.repeat(2_000) },
  ];
  const envelope = await timed(() =>
    sealPrompt(preparePrompt('llama3.2:1b', conversation), session.publicKey, binding),
  );
  line('envelope and encryption (2 KB conversation)', envelope);
  const wire = sealPrompt(preparePrompt('llama3.2:1b', conversation), session.publicKey, binding);
  const data = encodeBlob(wire);
  const commitment = await timed(() => commitmentOf(data));
  line('KZG commitment (before the hand-over, on a KZG thread)', commitment);
  const committed = commitmentOf(data);
  const proof = await timed(() => proofOf(data, committed));
  line('KZG proof (beside the hand-over, on a KZG thread)', proof);
  const sidecar = blobSidecarOf(wire);
  const wallet = Wallet.createRandom();
  const request = {
    type: 3,
    chainId: 31337n,
    nonce: 1,
    to: binding.jobRegistry,
    data: `0x${'ab'.repeat(100)}`,
    value: 0n,
    gasLimit: 300_000n,
    maxFeePerGas: 10n ** 10n,
    maxPriorityFeePerGas: 1n,
    maxFeePerBlobGas: 2n,
  };
  const fast = await timed(() => signTransaction(wallet, request, [sidecar]));
  const ethersPath = await timed(async () => {
    const raw = await wallet.signTransaction({
      ...request,
      blobs: [{ data: sidecar.data, commitment: sidecar.commitment, proof: sidecar.proof }],
      kzg,
    });
    return Transaction.from(raw).hash;
  });
  line('signing, sidecar appended as bytes (used)', fast);
  line(
    "signing, ethers' own path (hex sidecar, parsed for the hash)",
    ethersPath,
    `(${(ethersPath / fast).toFixed(0)}x)`,
  );
}

async function main(): Promise<void> {
  await cpuBreakdown();

  const devnet = await startTestDevnet({ accounts: 40, warmBlobs: true, models: DEPLOYED_MODELS });
  await prepareServiceAccounts(devnet);
  await preparePerCallAccounts(devnet);
  const store = new MemoryStore();
  let stack: CompletionStack | undefined;
  try {
    stack = await startCompletionStack(devnet, {
      store,
      perCall: {},
      env: {
        TX_POLL_INTERVAL: '20ms',
        JOB_POLL_INTERVAL: '50ms',
        SESSION_OPENS_PER_MINUTE: '1000',
        SESSION_OPENS_UNPAID_PER_MINUTE: '1000',
        SESSION_UNUSED_PER_WALLET: '1000',
        LINK_HEARTBEAT_INTERVAL: '1s',
        LINK_PRESENCE_TTL: '5s',
        FINAL_ANSWER_GRACE: '30s',
      },
    });
    await stack.startWorker({ tokensPerSecond: 0, capacity: 16, sessionLimit: 32 });
    await stack.startWorker({ tokensPerSecond: 0, capacity: 16, sessionLimit: 32 });

    console.log(`\n2. Latency on a warm pooled session (median of ${LATENCY_CALLS} sequential calls)`);
    const caller = await stack.payingWallet(parseEther('10'));
    await stack.complete(caller.address, 'warm the session up');
    const mined: number[] = [];
    const firstDelta: number[] = [];
    const total: number[] = [];
    for (let call = 0; call < LATENCY_CALLS; call++) {
      const seen = stack.events.length;
      const started = performance.now();
      let first: number | undefined;
      const request = completionRequest(caller.address, `latency ${call}`, `bench-${call}`);
      let submittedAt: number | undefined;
      const watch = setInterval(() => {
        if (
          !submittedAt &&
          stack!.events.slice(seen).some((event) => event.kind === JobLifecycleKind.SUBMITTED)
        )
          submittedAt = performance.now();
      }, 1);
      for await (const response of stack.client.runCompletion(request)) {
        if (response.event.case === 'delta' && first === undefined) first = performance.now() - started;
      }
      clearInterval(watch);
      total.push(performance.now() - started);
      firstDelta.push(first ?? Number.NaN);
      mined.push((submittedAt ?? Number.NaN) - started);
    }
    line('request in -> submission mined (SUBMITTED published)', median(mined));
    line('request in -> first delta (target 300 ms)', median(firstDelta));
    line('request in -> completed (verified against the commitment)', median(total));
    const delegate = { mined: median(mined), total: median(total) };
    await perCallLatency(stack, devnet, delegate);

    console.log(
      `\n4. Sustained throughput: ${WALLETS} wallets calling concurrently for ${THROUGHPUT_SECONDS} s`,
    );
    const wallets: Wallet[] = [];
    for (let i = 0; i < WALLETS; i++) wallets.push(await stack.payingWallet(parseEther('10')));
    await Promise.all(wallets.map((payer) => stack!.complete(payer.address, 'open my session')));
    const deadline = performance.now() + THROUGHPUT_SECONDS * 1000;
    let completed = 0;
    let failed = 0;
    const failures = new Map<string, number>();
    const started = performance.now();
    await Promise.all(
      wallets.map(async (payer, index) => {
        for (let call = 0; performance.now() < deadline; call++) {
          const events = await stack!.complete(payer.address, `throughput ${index}.${call}`);
          if (events.some((event) => event.case === 'completed')) completed += 1;
          else {
            failed += 1;
            const failure = events.find((event) => event.case === 'failed');
            const code =
              failure?.case === 'failed'
                ? `${failure.value.error?.code}: ${failure.value.error?.message}`
                : '?';
            failures.set(code, (failures.get(code) ?? 0) + 1);
          }
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    console.log(
      `${'completions per second'.padEnd(58)} ${(completed / seconds).toFixed(2).padStart(8)}     (${completed} completed, ${failed} failed in ${seconds.toFixed(1)} s)`,
    );
    if (failures.size > 0) console.log('failures by code', Object.fromEntries(failures));
  } finally {
    await stack?.stop();
    await store.close();
    await devnet.stop();
  }
}

/** Section 3: the same warm-session call paid per call, timed step by step against the delegate path's. */
async function perCallLatency(
  stack: CompletionStack,
  devnet: Devnet,
  delegate: { readonly mined: number; readonly total: number },
): Promise<void> {
  console.log(`\n3. A call paid per call on a warm session (median of ${LATENCY_CALLS} sequential calls)`);
  const payer = await depositedWallet(devnet, parseEther('10'));
  const warm = await verifiedPayment(stack, await signedPayment(stack, payer));
  for await (const _ of stack.client.runCompletion(perCallRequest(warm, 'warm the session up')));
  const verify: number[] = [];
  const settled: number[] = [];
  const total: number[] = [];
  for (let call = 0; call < LATENCY_CALLS; call++) {
    const header = await signedPayment(stack, payer);
    const verifying = performance.now();
    const payment = await verifiedPayment(stack, header);
    verify.push(performance.now() - verifying);
    const seen = stack.events.length;
    const started = performance.now();
    let settledAt: number | undefined;
    const watch = setInterval(() => {
      if (
        !settledAt &&
        stack.events.slice(seen).some((event) => event.kind === JobLifecycleKind.PAYMENT_SETTLED)
      )
        settledAt = performance.now();
    }, 1);
    for await (const _ of stack.client.runCompletion(perCallRequest(payment, `per call ${call}`)));
    clearInterval(watch);
    total.push(performance.now() - started);
    settled.push((settledAt ?? Number.NaN) - started);
  }
  line('VerifyPayment (reads, signature, reservation)', median(verify));
  line(
    'request in -> settlement mined (PAYMENT_SETTLED published)',
    median(settled),
    `(${(median(settled) / delegate.mined).toFixed(2)}x the delegate submission)`,
  );
  line(
    'request in -> completed',
    median(total),
    `(${(median(total) / delegate.total).toFixed(2)}x the delegate call)`,
  );
  line(
    'verify + call, what a paying client waits for',
    median(verify) + median(total),
    `(${((median(verify) + median(total)) / delegate.total).toFixed(2)}x the delegate call)`,
  );
}

await main();
