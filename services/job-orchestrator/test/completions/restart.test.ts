import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import {
  createTestStore,
  TEST_REDIS_URL,
  TEST_SERVICE_TOKEN_SETTINGS,
  testServiceClientOptions,
  type TestStore,
} from '@svc/platform/testing';
import { closeClient, createClient, type ServiceClient } from '@svc/proto';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { freePort, useDevnet, waitUntil } from '@svc/testkit';
import { deterministicAnswer } from '@svc/worker';
import { ChainClient, JobState } from '@svc/chain';
import { connectJobRegistry } from '@svc/contracts';
import { parseEther } from 'ethers';
import { completionRequest, prepareServiceAccounts, SERVICE_ACCOUNTS } from '../support/completion-stack.js';
import { DEPLOYED_MODELS } from '../support/models.js';
import { fundedWallet, startReferenceWorker, type ReferenceWorker } from '../support/reference-worker.js';

// The orchestrator as its own process (`svc-server --target job-orchestrator`) on Redis, killed with
// SIGKILL in the middle of a streamed job and started again: the job still ends in a terminal state,
// and the restarted replica sends again without reusing a nonce.
const devnet = useDevnet({
  models: DEPLOYED_MODELS,
  warmBlobs: true,
  accounts: 14,
  protocol: { disputeWindowSeconds: 2 },
});
const serverMain = fileURLToPath(new URL('../../../../apps/server/src/main.ts', import.meta.url));
type Client = ServiceClient<typeof JobOrchestrator extends GenService<infer S> ? S : never>;

let redis: TestStore;
let stateDir: string;
let port: number;
/** The worker link's port: fixed, so the worker redials the restarted process where it was. */
let linkPort: number;
let worker: ReferenceWorker;

class Orchestrator {
  output = '';
  private constructor(readonly child: ChildProcess) {
    child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
  }

  static async start(): Promise<Orchestrator> {
    const net = devnet();
    const keys = (indices: readonly number[]) =>
      indices.map((index) => net.wallet(index).privateKey).join(',');
    const child = spawn(
      process.execPath,
      ['--conditions=@svc/source', '--import', 'tsx', serverMain, '--target', 'job-orchestrator'],
      {
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          LOG_LEVEL: 'info',
          STATE_DIR: stateDir,
          RPC_URL: net.anvil.rpcUrl,
          CHAIN_ID: String(net.anvil.chainId),
          JOB_REGISTRY_ADDRESS: net.deployment.jobRegistryAddress,
          WORKER_REGISTRY_ADDRESS: net.deployment.workerRegistryAddress,
          REDIS_URL: TEST_REDIS_URL,
          STORE_NAMESPACE: redis.namespace,
          GRPC_HOST: '127.0.0.1',
          GRPC_PORT: String(port),
          WORKER_LINK_PORT: String(linkPort),
          METRICS_PORT: '0',
          SERVICE_SIGNER_PRIVATE_KEY: net.wallet(SERVICE_ACCOUNTS.signer).privateKey,
          BLOB_OPERATOR_PRIVATE_KEYS: keys(SERVICE_ACCOUNTS.blobOperators),
          PLAIN_OPERATOR_PRIVATE_KEYS: keys([SERVICE_ACCOUNTS.plainOperator]),
          LINK_HEARTBEAT_INTERVAL: '100ms',
          LINK_PRESENCE_TTL: '1s',
          TX_POLL_INTERVAL: '20ms',
          JOB_POLL_INTERVAL: '50ms',
          KEEPER_INTERVAL: '200ms',
          ...TEST_SERVICE_TOKEN_SETTINGS,
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const orchestrator = new Orchestrator(child);
    await waitUntil(
      async () => orchestrator.output,
      (output) => output.includes('"msg":"job-orchestrator started"') || child.exitCode !== null,
      { what: 'the orchestrator process started', timeoutMs: 60_000, intervalMs: 100 },
    );
    if (child.exitCode !== null) throw new Error(`the orchestrator exited:\n${orchestrator.output}`);
    return orchestrator;
  }

  kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return Promise.resolve();
    const exited = new Promise<void>((resolve) => this.child.once('exit', () => resolve()));
    this.child.kill('SIGKILL');
    return exited;
  }
}

let orchestrator: Orchestrator | undefined;

beforeAll(async () => {
  await prepareServiceAccounts(devnet());
  redis = createTestStore('orchestrator-restart');
  stateDir = mkdtempSync(join(tmpdir(), 'orchestrator-restart-'));
  port = await freePort();
  linkPort = await freePort();
  orchestrator = await Orchestrator.start();
  // Slow enough that the kill lands in the middle of the answer.
  worker = await startReferenceWorker(devnet(), `127.0.0.1:${linkPort}`, { tokensPerSecond: 4 });
}, 120_000);

afterAll(async () => {
  await orchestrator?.kill();
  await worker?.stop();
  await redis?.cleanup();
  rmSync(stateDir, { recursive: true, force: true });
});

async function payingWallet() {
  const wallet = (await fundedWallet(devnet())).connect(devnet().provider);
  const registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, wallet);
  await (
    await registry.depositAndAuthorize(devnet().wallet(SERVICE_ACCOUNTS.signer).address, {
      value: parseEther('1'),
    })
  ).wait();
  return wallet;
}

describe('an orchestrator killed in the middle of a job', () => {
  it('leaves no job behind: the job ends terminal after a restart, and new jobs reuse no nonce', async () => {
    const chain = new ChainClient({
      provider: devnet().provider,
      jobRegistryAddress: devnet().deployment.jobRegistryAddress,
      workerRegistryAddress: devnet().deployment.workerRegistryAddress,
    });
    const wallet = await payingWallet();
    let client: Client = createClient(
      JobOrchestrator,
      `127.0.0.1:${port}`,
      testServiceClientOptions('job-orchestrator'),
    );
    let jobId: bigint | undefined;
    try {
      for await (const response of client.runCompletion(
        completionRequest(wallet.address, 'kill me softly', 'killed-call'),
      )) {
        if (response.event.case === 'failed')
          throw new Error(`failed: ${JSON.stringify(response.event.value.error)}\n${orchestrator!.output}`);
        if (response.event.case === 'started') jobId = BigInt(response.event.value.service!.jobId);
        if (response.event.case === 'delta') {
          await orchestrator!.kill();
          break;
        }
      }
    } catch (error) {
      // The stream breaks with the process.
      if (jobId === undefined) throw new Error(`${String(error)}\n${orchestrator!.output}`, { cause: error });
    } finally {
      closeClient(client);
    }
    expect(jobId).toBeDefined();
    expect((await chain.getJob(jobId!)).state).toBe(JobState.Submitted);

    orchestrator = await Orchestrator.start();
    // The worker finishes and commits; the new replica's keeper releases it after the dispute window.
    await waitUntil(
      () => chain.getJob(jobId!),
      (job) => job.state === JobState.Released,
      { what: `job ${jobId} released`, timeoutMs: 60_000, intervalMs: 250 },
    );

    await waitUntil(
      async () => (await redis.open().presence.list('worker-link:workers')).length,
      (count) => count === 1,
      { what: 'the worker linked again', timeoutMs: 15_000 },
    );
    client = createClient(JobOrchestrator, `127.0.0.1:${port}`, testServiceClientOptions('job-orchestrator'));
    try {
      let text = '';
      for await (const response of client.runCompletion(
        completionRequest(wallet.address, 'after the restart', 'after-call'),
      )) {
        if (response.event.case === 'delta') text += response.event.value.text;
        if (response.event.case === 'failed') throw new Error(`failed: ${response.event.value.error?.code}`);
      }
      expect(text).toBe(deterministicAnswer([{ role: 'user', content: 'after the restart' }]));
    } finally {
      closeClient(client);
    }
    const store = redis.open();
    for (const index of [...SERVICE_ACCOUNTS.blobOperators, SERVICE_ACCOUNTS.plainOperator]) {
      const address = devnet().wallet(index).address;
      const next = await store.nonces.peek(address);
      if (next !== null) expect(next).toBe(await devnet().provider.getTransactionCount(address, 'latest'));
    }
    expect(orchestrator!.output).not.toMatch(/"level":(50|60)/);
  }, 120_000);
});
