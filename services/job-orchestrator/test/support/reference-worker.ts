import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseEther, Wallet } from 'ethers';
import { AnvilBlobSource } from '@svc/chain';
import { createLogger } from '@svc/platform';
import type { Devnet } from '@svc/testkit';
import {
  DeterministicModel,
  linkBackoff,
  parseGenerationFault,
  startWorker,
  type RunningWorker,
} from '@svc/worker';
import { MODEL } from './models.js';

export const WORKER_CAPACITY = 3;
export const WORKER_SESSION_LIMIT = 5;

/** The reference worker, registered on the devnet and linked to `target`. */
export interface ReferenceWorker {
  readonly worker: RunningWorker;
  readonly wallet: Wallet;
  stop(): Promise<void>;
}

/** A fresh key funded by dev account `funder`. */
export async function fundedWallet(devnet: Devnet, funder = 11): Promise<Wallet> {
  const wallet = Wallet.createRandom();
  await (await devnet.wallet(funder).sendTransaction({ to: wallet.address, value: parseEther('20') })).wait();
  return new Wallet(wallet.privateKey);
}

/** How a test worker's built-in model behaves and how much it takes on. */
export interface ReferenceWorkerOptions {
  /** A fault applied to every job, e.g. `fail-before-first-chunk`. */
  readonly fault?: string;
  /** Lets a prompt pick a fault with `#fault:<kind>`. */
  readonly faultsFromPrompt?: boolean;
  readonly capacity?: number;
  readonly sessionLimit?: number;
  readonly tokensPerSecond?: number;
  /** Model names served (default: the test model). */
  readonly models?: readonly string[];
  /** The worker's key and data directory, to start the same worker again (default: new ones). */
  readonly identity?: { readonly wallet: Wallet; readonly dataDir: string };
}

export async function startReferenceWorker(
  devnet: Devnet,
  target: string,
  options: ReferenceWorkerOptions = {},
): Promise<ReferenceWorker> {
  const wallet = options.identity?.wallet ?? (await fundedWallet(devnet));
  const dataDir = options.identity?.dataDir ?? (await mkdtemp(join(tmpdir(), 'orchestrator-worker-')));
  const worker = await startWorker({
    settings: {
      dataDir,
      stakeWei: parseEther('1'),
      capacity: options.capacity ?? WORKER_CAPACITY,
      sessionLimit: options.sessionLimit ?? WORKER_SESSION_LIMIT,
      sessionSweepIntervalMs: 0,
      guards: { minRunSeconds: 3, commitMarginSeconds: 2 },
      claimMarginSeconds: 1,
      coalesceMs: 0,
      maxDeltaChars: 1_000,
      confirmations: 0,
      pollIntervalMs: 50,
      fromBlock: devnet.deployment.deploymentBlock,
      vaultScryptN: 1 << 10,
      withdrawThresholdWei: parseEther('0.001'),
      releaseIntervalMs: 0,
    },
    provider: devnet.provider,
    wallet,
    password: 'orchestrator test password',
    jobRegistryAddress: devnet.deployment.jobRegistryAddress,
    workerRegistryAddress: devnet.deployment.workerRegistryAddress,
    blobSource: new AnvilBlobSource({ rpcUrl: devnet.anvil.rpcUrl }),
    model: new DeterministicModel({
      models: options.models ?? [MODEL.name],
      tokensPerSecond: options.tokensPerSecond ?? 200,
      ...(options.fault ? { fault: parseGenerationFault(options.fault) } : {}),
      faultsFromPrompt: options.faultsFromPrompt ?? false,
    }),
    link: {
      target,
      backoff: linkBackoff(20, 200),
      defaultHeartbeatMs: 1_000,
      software: 'svc-worker/orchestrator-test',
    },
    logger: createLogger({ service: 'worker-test', level: process.env.TEST_LOG_LEVEL ?? 'fatal' }),
  });
  return {
    worker,
    wallet,
    async stop() {
      await worker.stop();
      // A worker started again keeps its data, as a restarted process does.
      if (!options.identity) await rm(dataDir, { recursive: true, force: true });
    },
  };
}
