import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseEther, Wallet } from 'ethers';
import { AnvilBlobSource } from '@svc/chain';
import { createLogger } from '@svc/platform';
import type { Devnet } from '@svc/testkit';
import type { AnswerChannel } from '../../src/jobs/answer-channel.js';
import type { DeltaFrame } from '../../src/jobs/answer-stream.js';
import type { SignedFinalAnswer } from '../../src/jobs/final-answer-journal.js';
import { DeterministicModel } from '../../src/model/index.js';
import type { ModelBackend } from '../../src/model/model-backend.js';
import { startWorker, type RunningWorker, type WorkerSettings } from '../../src/service.js';
import type { WorkerLinkSettings } from '../../src/worker-types.js';
import { MODEL, OTHER_MODEL } from './models.js';

export const TEST_PASSWORD = 'worker test password';

/** Frames a worker sent, as the link would have carried them. */
export class RecordingChannel implements AnswerChannel {
  readonly deltas: DeltaFrame[] = [];
  readonly finals: SignedFinalAnswer[] = [];
  readonly errors: { jobId: bigint; attempt: number; reason: string }[] = [];

  sendDelta(delta: DeltaFrame): void {
    this.deltas.push(delta);
  }
  sendFinal(answer: SignedFinalAnswer): void {
    this.finals.push(answer);
  }
  sendError(jobId: bigint, attempt: number, reason: string): void {
    this.errors.push({ jobId, attempt, reason });
  }
  deltasOf(jobId: bigint): DeltaFrame[] {
    return this.deltas.filter((delta) => delta.jobId === jobId);
  }
  finalOf(jobId: bigint): SignedFinalAnswer | undefined {
    return this.finals.find((answer) => answer.jobId === jobId);
  }
}

export interface TestWorker {
  worker: RunningWorker;
  channel: RecordingChannel;
  wallet: Wallet;
  dataDir: string;
}

export const TEST_SETTINGS: Omit<WorkerSettings, 'dataDir'> = {
  stakeWei: parseEther('1'),
  capacity: 4,
  sessionLimit: 8,
  sessionSweepIntervalMs: 0,
  guards: { minRunSeconds: 3, commitMarginSeconds: 2 },
  claimMarginSeconds: 1,
  coalesceMs: 0,
  maxDeltaChars: 1_000,
  confirmations: 0,
  pollIntervalMs: 50,
  vaultScryptN: 1 << 10,
  withdrawThresholdWei: parseEther('0.001'),
  releaseIntervalMs: 0,
};

export async function makeDataDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'worker-data-'));
}

export async function removeDataDir(dataDir: string): Promise<void> {
  await rm(dataDir, { recursive: true, force: true });
}

/** A funded fresh worker key. */
export async function fundedWorkerWallet(devnet: Devnet, funder = 11): Promise<Wallet> {
  const wallet = Wallet.createRandom();
  await (await devnet.wallet(funder).sendTransaction({ to: wallet.address, value: parseEther('20') })).wait();
  return new Wallet(wallet.privateKey);
}

export function deterministicModel(overrides: { tokensPerSecond?: number } = {}): DeterministicModel {
  return new DeterministicModel({
    models: [MODEL.name, OTHER_MODEL.name],
    faultsFromPrompt: true,
    ...overrides,
  });
}

export async function startTestWorker(
  devnet: Devnet,
  options: {
    wallet: Wallet;
    dataDir: string;
    model?: ModelBackend;
    settings?: Partial<WorkerSettings>;
    link?: WorkerLinkSettings;
  },
): Promise<TestWorker> {
  const channel = new RecordingChannel();
  const worker = await startWorker({
    settings: {
      ...TEST_SETTINGS,
      fromBlock: devnet.deployment.deploymentBlock,
      ...options.settings,
      dataDir: options.dataDir,
    },
    provider: devnet.provider,
    wallet: options.wallet,
    password: TEST_PASSWORD,
    jobRegistryAddress: devnet.deployment.jobRegistryAddress,
    workerRegistryAddress: devnet.deployment.workerRegistryAddress,
    blobSource: new AnvilBlobSource({ rpcUrl: devnet.anvil.rpcUrl }),
    model: options.model ?? deterministicModel(),
    ...(options.link ? { link: options.link } : {}),
    logger: createLogger({ service: 'worker-test', level: process.env.TEST_LOG_LEVEL ?? 'fatal' }),
  });
  worker.setAnswerChannel(channel);
  return { worker, channel, wallet: options.wallet, dataDir: options.dataDir };
}
