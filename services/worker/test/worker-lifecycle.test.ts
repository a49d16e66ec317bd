import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AnvilBlobSource, JobState, SessionState, responseHashOf } from '@svc/chain';
import { parseEther } from 'ethers';
import { createLogger } from '@svc/platform';
import { ChainClock } from '@svc/anvil';
import { useDevnet, waitUntil } from '@svc/testkit';
import { HealthServer } from '../src/health/health-server.js';
import { DeterministicModel } from '../src/model/index.js';
import { linkBackoff } from '../src/link/worker-link.js';
import { DEPLOYED_MODELS, MODEL } from './support/models.js';
import { ServiceSide } from './support/service-side.js';
import { TestLinkServer } from './support/test-link-server.js';
import {
  TEST_PASSWORD,
  TEST_SETTINGS,
  fundedWorkerWallet,
  makeDataDir,
  removeDataDir,
} from './support/worker-harness.js';
import { startWorker, type RunningWorker } from '../src/service.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, protocol: { jobTimeoutSeconds: 30 } });
let service: ServiceSide;
let linkServer: TestLinkServer;
let worker: RunningWorker;
let health: HealthServer;
let healthUrl: string;
let dataDir: string;
let sessionId: bigint;

beforeAll(async () => {
  const net = devnet();
  service = new ServiceSide(net.wallet(4), net.deployment, BigInt(net.anvil.chainId));
  await service.deposit();
  linkServer = new TestLinkServer(BigInt(net.anvil.chainId), net.deployment.jobRegistryAddress);
  await linkServer.start();
  dataDir = await makeDataDir();
  worker = await startWorker({
    settings: {
      ...TEST_SETTINGS,
      dataDir,
      fromBlock: net.deployment.deploymentBlock,
      coalesceMs: 30,
      // Below one job's worker share (0.00095 ether), so the first release is withdrawn.
      withdrawThresholdWei: parseEther('0.0005'),
    },
    provider: net.provider,
    wallet: await fundedWorkerWallet(net),
    password: TEST_PASSWORD,
    jobRegistryAddress: net.deployment.jobRegistryAddress,
    workerRegistryAddress: net.deployment.workerRegistryAddress,
    blobSource: new AnvilBlobSource({ rpcUrl: net.anvil.rpcUrl }),
    model: new DeterministicModel({ models: [MODEL.name], tokensPerSecond: 40 }),
    link: {
      target: linkServer.target,
      backoff: linkBackoff(20, 200),
      defaultHeartbeatMs: 1_000,
      software: 'svc-worker/test',
    },
    logger: createLogger({ service: 'worker-test', level: process.env.TEST_LOG_LEVEL ?? 'fatal' }),
  });
  health = new HealthServer({
    host: '127.0.0.1',
    port: 0,
    metrics: worker.metrics.registry,
    notReadyBecause: () => (worker.status().draining ? 'draining' : undefined),
  });
  healthUrl = `http://127.0.0.1:${await health.listen()}`;
}, 60_000);

afterAll(async () => {
  await health?.close();
  await worker?.stop();
  await linkServer?.stop();
  if (dataDir) await removeDataDir(dataDir);
});

describe('a worker linked to the orchestrator', () => {
  it('heartbeats its models and free capacity', async () => {
    await waitUntil(
      async () => linkServer.framesOf('heartbeat').length,
      (count) => count > 0,
      { what: 'a heartbeat', timeoutMs: 5_000 },
    );
    expect(linkServer.verifiedWorkers).toEqual([worker.address]);
    expect(linkServer.framesOf('heartbeat')[0]).toMatchObject({
      models: [MODEL.name],
      freeJobSlots: TEST_SETTINGS.capacity,
      freeSessionSlots: TEST_SETTINGS.sessionLimit,
    });
  });

  it('claims on a hint, streams coalesced chunks and the final, and forgets the final once acknowledged', async () => {
    sessionId = await service.openSession(worker.address, MODEL.name);
    linkServer.send({
      frame: { case: 'sessionOpened', value: { hintId: 's1', sessionId: sessionId.toString() } },
    });
    await service.waitForClaim(sessionId);
    await waitUntil(
      async () => linkServer.framesOf('hintAck').length,
      (count) => count === 1,
      { what: 'the hint acknowledgement', timeoutMs: 5_000 },
    );

    const job = await service.submitJob(sessionId, MODEL.name, {
      kind: 'prompt',
      messages: [{ role: 'user', content: 'Stream this answer to me please, word by word.' }],
    });
    const onChain = await service.waitForOutcome(job.jobId);
    expect(onChain.state).toBe(JobState.Completed);
    const finals = await waitUntil(
      async () => linkServer.framesOf('finalAnswer').filter((final) => final.jobId === job.jobId.toString()),
      (found) => found.length > 0,
      { what: 'the final answer of the job', timeoutMs: 5_000 },
    );
    expect(responseHashOf(finals[0]!.sealedAnswer)).toBe(await service.committedHash(onChain));
    const chunks = linkServer.framesOf('chunk').filter((chunk) => chunk.jobId === job.jobId.toString());
    expect(chunks.map((chunk) => chunk.seq)).toEqual(chunks.map((_, index) => index + 1));
    expect(finals[0]!.seq).toBe(chunks.length);
    expect(chunks.length).toBeGreaterThan(1);

    await waitUntil(
      () => worker.journal.all(),
      (saved) => saved.length === 1,
      { what: 'the final in the journal', timeoutMs: 5_000 },
    );
    linkServer.send({
      frame: { case: 'finalAck', value: { jobId: job.jobId.toString(), attempt: 1, committed: true } },
    });
    await waitUntil(
      () => worker.journal.all(),
      (saved) => saved.length === 0,
      { what: 'the journal emptied by the acknowledgement', timeoutMs: 5_000 },
    );
  });

  it('answers health and metrics probes', async () => {
    expect((await fetch(`${healthUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${healthUrl}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${healthUrl}/metrics`)).text();
    expect(metrics).toContain('worker_jobs_total{outcome="completed"} 1');
    expect(metrics).toContain('worker_link_connected 1');
  });

  it('releases completed jobs after the dispute window and withdraws its earnings', async () => {
    const net = devnet();
    const before = await net.provider.getBalance(worker.address);
    expect((await worker.earnings.collect()).released).toEqual([]);
    const { disputeWindowSeconds } = await service.chain.parameters();
    await new ChainClock(net.provider).advance(disputeWindowSeconds + 1);
    const report = await worker.earnings.collect();
    expect(report.released).toHaveLength(1);
    expect(report.withdrawnWei).toBe((MODEL.feeWei * 95n) / 100n);
    expect(await service.chain.earningsOf(worker.address)).toBe(0n);
    expect(await net.provider.getBalance(worker.address)).toBeGreaterThan(before);
  });

  it('drains on request: finishes the job in flight and claims nothing new', async () => {
    const job = await service.submitJob(sessionId, MODEL.name, {
      kind: 'prompt',
      messages: [{ role: 'user', content: 'one more, slowly, before you go' }],
    });
    await waitUntil(
      async () => worker.status().runningJobs,
      (running) => running === 1,
      { what: 'the job running', timeoutMs: 10_000 },
    );
    const drained = worker.drain();
    expect((await fetch(`${healthUrl}/readyz`)).status).toBe(503);
    const late = await service.openSession(worker.address, MODEL.name);
    await drained;
    expect((await service.chain.getJob(job.jobId)).state).toBe(JobState.Completed);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await service.chain.getSession(late)).state).toBe(SessionState.Open);
    expect(worker.status()).toMatchObject({ freeJobSlots: 0, freeSessionSlots: 0, draining: true });
  });
});
