import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseEther } from 'ethers';
import { AnswerFrameKind, JobState, decryptAnswerFrame } from '@svc/chain';
import { loadOrCreateWorkerKey } from '../src/identity/worker-keystore.js';
import { deterministicAnswer } from '../src/model/index.js';
import { useDevnet, waitFor, waitUntil } from '@svc/testkit';
import { DEPLOYED_MODELS, MODEL } from './support/models.js';
import { ServiceSide } from './support/service-side.js';
import { TestLinkServer } from './support/test-link-server.js';
import { TEST_PASSWORD, makeDataDir, removeDataDir } from './support/worker-harness.js';

const packageDir = join(fileURLToPath(import.meta.url), '..', '..');
const devnet = useDevnet({ warmBlobs: true, models: DEPLOYED_MODELS, protocol: { jobTimeoutSeconds: 30 } });
let dataDir: string;
let child: ChildProcess | undefined;
let linkServer: TestLinkServer;
const logLines: Record<string, unknown>[] = [];

beforeAll(async () => {
  dataDir = await makeDataDir();
  const net = devnet();
  linkServer = new TestLinkServer(BigInt(net.anvil.chainId), net.deployment.jobRegistryAddress);
  await linkServer.start();
}, 60_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }
  await linkServer?.stop();
  await removeDataDir(dataDir);
});

describe('the worker process', () => {
  it('starts from its keystore, serves a job end to end over chain and link, and drains on SIGTERM', async () => {
    const net = devnet();
    const keystorePath = join(dataDir, 'worker-keystore.json');
    const key = await loadOrCreateWorkerKey({
      path: keystorePath,
      password: TEST_PASSWORD,
      scryptN: 1 << 10,
    });
    await (await net.wallet(10).sendTransaction({ to: key.wallet.address, value: parseEther('5') })).wait();

    child = spawn(process.execPath, ['--conditions=@svc/source', '--import', 'tsx', 'src/main.ts'], {
      cwd: packageDir,
      env: {
        ...process.env,
        LOG_LEVEL: 'info',
        RPC_URL: net.anvil.rpcUrl,
        CHAIN_ID: String(net.anvil.chainId),
        BLOCK_TIME: '200ms',
        JOB_REGISTRY_ADDRESS: net.deployment.jobRegistryAddress,
        WORKER_REGISTRY_ADDRESS: net.deployment.workerRegistryAddress,
        START_BLOCK: String(net.deployment.deploymentBlock),
        LOG_POLL_INTERVAL: '100ms',
        DATA_DIR: dataDir,
        KEYSTORE_PASSWORD: TEST_PASSWORD,
        STAKE_WEI: parseEther('1').toString(),
        // HEALTH_HOST left at its default: loopback only (checked below).
        HEALTH_PORT: '0',
        MIN_RUN_TIME: '3s',
        COMMIT_MARGIN: '2s',
        DETERMINISTIC_MODELS: MODEL.name,
        DETERMINISTIC_TOKENS_PER_SECOND: '0',
        ORCHESTRATOR_LINK: linkServer.target,
        DRAIN_TIMEOUT: '10s',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buffered = '';
    child.stdout!.on('data', (data: Buffer) => {
      buffered += data.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        try {
          logLines.push(JSON.parse(line) as Record<string, unknown>);
        } catch {
          // Not a log line.
        }
      }
    });
    const running = await waitFor(() => logLines.find((line) => line.msg === 'worker running'), {
      what: 'the worker running',
      timeoutMs: 30_000,
    });
    expect(running!.worker).toBe(key.wallet.address);
    const healthUrl = String(running!.health);
    await waitUntil(
      async () => (await fetch(`${healthUrl}/readyz`)).status,
      (status) => status === 200,
      { what: 'the worker ready', timeoutMs: 10_000 },
    );
    expect(healthUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const outside = nonLoopbackIPv4();
    if (outside) {
      const refused = await fetch(healthUrl.replace('127.0.0.1', outside) + '/healthz').catch(
        (error: unknown) => error,
      );
      expect((refused as { cause?: { code?: string } }).cause?.code).toBe('ECONNREFUSED');
    } else {
      console.log('skipped the off-loopback health probe: this machine has no non-loopback IPv4 address');
    }

    const service = new ServiceSide(net.wallet(5), net.deployment, BigInt(net.anvil.chainId));
    await service.deposit();
    const sessionId = await service.openSession(key.wallet.address, MODEL.name);
    await service.waitForClaim(sessionId);
    const job = await service.submitJob(sessionId, MODEL.name, {
      kind: 'prompt',
      messages: [{ role: 'user', content: 'Are you a real process?' }],
    });
    expect((await service.waitForOutcome(job.jobId)).state).toBe(JobState.Completed);
    const final = await waitFor(
      () => linkServer.framesOf('finalAnswer').find((frame) => frame.jobId === job.jobId.toString()),
      { what: 'the final answer on the link', timeoutMs: 5_000 },
    );
    const text = decryptAnswerFrame(AnswerFrameKind.Final, final!.sealedAnswer, job.replyKey, {
      jobId: job.jobId,
      attempt: 1,
      seq: final!.seq,
    });
    expect(text).toBe(deterministicAnswer(job.messages));
    expect(JSON.stringify(logLines)).not.toContain(TEST_PASSWORD);

    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number | null];
    expect(code).toBe(0);
    expect(logLines.some((line) => line.msg === 'shutdown complete' && line.clean === true)).toBe(true);
  }, 90_000);
});

/** An address of this machine that is not loopback, to check what listens only on 127.0.0.1. */
function nonLoopbackIPv4(): string | undefined {
  return Object.values(networkInterfaces())
    .flat()
    .find((address) => address?.family === 'IPv4' && !address.internal)?.address;
}
