// Figures for the note, measured on one anvil with the built-in model (no pacing):
//  - time from JobSubmitted mined to the first delta at the orchestrator's end of the link,
//  - time from JobSubmitted mined to completeJob mined,
//  - jobs per second one worker sustains at capacity 4.
// Run: cd services/worker && npm run bench
import { performance } from 'node:perf_hooks';
import { parseEther, Wallet } from 'ethers';
import { AnvilBlobSource, JobState } from '@svc/chain';
import { deployContracts } from '@svc/contracts';
import { createLogger } from '@svc/platform';
import { createDevProvider, startAnvil, DevWallet } from '@svc/anvil';
import { DeterministicModel } from '../src/model/index.js';
import { linkBackoff } from '../src/link/worker-link.js';
import { startWorker } from '../src/service.js';
import { waitUntil } from '@svc/testkit';
import { ServiceSide } from '../test/support/service-side.js';
import { TestLinkServer } from '../test/support/test-link-server.js';
import { TEST_PASSWORD, TEST_SETTINGS, makeDataDir, removeDataDir } from '../test/support/worker-harness.js';

const MODEL = { name: 'svc-deterministic:bench', feeWei: parseEther('0.0001') };
const LATENCY_SAMPLES = 10;
const THROUGHPUT_JOBS = 24;
const CAPACITY = 4;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const anvil = await startAnvil({ accounts: 12, warmBlobs: true });
  const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
  const wallet = (index: number) => new DevWallet(anvil.accounts[index]!.privateKey, provider);
  const deployment = await deployContracts(wallet(0), {
    models: [MODEL],
    protocol: { jobTimeoutSeconds: 120 },
  });
  const link = new TestLinkServer(BigInt(anvil.chainId), deployment.jobRegistryAddress);
  await link.start();
  const dataDir = await makeDataDir();
  const key = Wallet.createRandom();
  await (await wallet(11).sendTransaction({ to: key.address, value: parseEther('10') })).wait();
  const worker = await startWorker({
    settings: { ...TEST_SETTINGS, dataDir, capacity: CAPACITY, pollIntervalMs: 25, coalesceMs: 20 },
    provider,
    wallet: new Wallet(key.privateKey),
    password: TEST_PASSWORD,
    jobRegistryAddress: deployment.jobRegistryAddress,
    workerRegistryAddress: deployment.workerRegistryAddress,
    blobSource: new AnvilBlobSource({ rpcUrl: anvil.rpcUrl }),
    model: new DeterministicModel({ models: [MODEL.name], tokensPerSecond: 0 }),
    link: {
      target: link.target,
      backoff: linkBackoff(20, 200),
      defaultHeartbeatMs: 1_000,
      software: 'bench',
    },
    logger: createLogger({ service: 'worker-bench', level: process.env.BENCH_LOG_LEVEL ?? 'error' }),
  });
  try {
    const services = [2, 3, 4, 5].map(
      (index) => new ServiceSide(wallet(index), deployment, BigInt(anvil.chainId)),
    );
    const sessions: bigint[] = [];
    for (const service of services) {
      await service.deposit(parseEther('1'));
      const sessionId = await service.openSession(worker.address, MODEL.name);
      await service.waitForClaim(sessionId);
      sessions.push(sessionId);
    }
    const ask = (n: number) => ({
      kind: 'prompt' as const,
      messages: [{ role: 'user' as const, content: `question ${n}` }],
    });

    const toFirstDelta: number[] = [];
    const toCommit: number[] = [];
    for (let n = 0; n < LATENCY_SAMPLES; n += 1) {
      const job = await services[0]!.submitJob(sessions[0]!, MODEL.name, ask(n));
      const mined = performance.now();
      const id = job.jobId.toString();
      await waitUntil(async () => link.framesOf('chunk').some((chunk) => chunk.jobId === id), Boolean, {
        what: 'the bench step',
        timeoutMs: 30_000,
      });
      toFirstDelta.push(performance.now() - mined);
      await waitUntil(
        () => services[0]!.chain.getJob(job.jobId),
        (state) => state.state === JobState.Completed,
        { what: 'the bench step', timeoutMs: 30_000 },
      );
      toCommit.push(performance.now() - mined);
    }

    // Closed loop, as the orchestrator offers work: four clients (one per session), each sending its next
    // job when the previous one is settled, so the worker is kept at its capacity of 4 and never over it.
    const started = performance.now();
    const perService = THROUGHPUT_JOBS / services.length;
    const jobs = (
      await Promise.all(
        services.map(async (service, index) => {
          const settled = [];
          for (let n = 0; n < perService; n += 1) {
            const job = await service.submitJob(sessions[index]!, MODEL.name, ask(1000 + n));
            await waitUntil(
              () => service.chain.getJob(job.jobId),
              (state) => state.state !== JobState.Submitted,
              { what: 'the job settled', timeoutMs: 120_000 },
            );
            settled.push(job);
          }
          return settled;
        }),
      )
    ).flat();
    const seconds = (performance.now() - started) / 1000;
    const completed = (await Promise.all(jobs.map((job) => services[0]!.chain.getJob(job.jobId)))).filter(
      (job) => job.state === JobState.Completed,
    ).length;

    console.log(
      `JobSubmitted mined → first delta at the link: median ${median(toFirstDelta).toFixed(0)} ms (n=${LATENCY_SAMPLES}; the poll interval is 25 ms)`,
    );
    console.log(
      `JobSubmitted mined → completeJob mined (seen by a 50 ms poll): median ${median(toCommit).toFixed(0)} ms`,
    );
    console.log(
      `capacity ${CAPACITY}: ${completed}/${jobs.length} jobs completed in ${seconds.toFixed(1)} s → ${(completed / seconds).toFixed(2)} jobs/s`,
    );
    console.log(
      '(end to end: each loop signs and sends a 128 KiB blob transaction, ~0.3 s of CPU, on the same 2 cores)',
    );
  } finally {
    await worker.stop();
    await link.stop();
    provider.destroy();
    await anvil.stop();
    await removeDataDir(dataDir);
  }
}

await main();
