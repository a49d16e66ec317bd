import type { BlobSource } from '@svc/chain';
import type { Logger, RetryPolicy } from '@svc/platform';
import type { ChannelCredentials } from '@svc/proto';
import type { JsonRpcProvider, Wallet } from 'ethers';
import type { ChainEventFollower } from './chain/chain-event-follower.js';
import type { EarningsCollector } from './earnings/earnings-collector.js';
import type { WorkerMetrics } from './health/worker-metrics.js';
import type { AnswerChannel } from './jobs/answer-channel.js';
import type { FinalAnswerJournal } from './jobs/final-answer-journal.js';
import type { IdleSessionCloser } from './sessions/idle-session-closer.js';
import type { JobDeadlineGuards, PendingJobBounds } from './jobs/job-runner.js';
import type { WorkerLink } from './link/worker-link.js';
import type { ModelBackend } from './model/model-backend.js';
import type { RegistrationOutcome } from './registration/worker-registration.js';

export interface WorkerSettings {
  /** Directory of the worker's durable state: session keys, final answers, chain cursor. */
  readonly dataDir: string;
  readonly stakeWei: bigint;
  /** Concurrent jobs. */
  readonly capacity: number;
  /** Sessions held open at once. */
  readonly sessionLimit: number;
  /** How often held sessions are checked for idleness past the inactivity timeout; 0 turns that off. */
  readonly sessionSweepIntervalMs: number;
  readonly guards: JobDeadlineGuards;
  readonly claimMarginSeconds: number;
  readonly coalesceMs: number;
  readonly maxDeltaChars: number;
  readonly confirmations: number;
  readonly pollIntervalMs: number;
  /** First block to read when no cursor is stored; the chain head when omitted. */
  readonly fromBlock?: number;
  /** scrypt cost of the session key vault (tests lower it). */
  readonly vaultScryptN?: number;
  /** Earnings are withdrawn once they reach this much. */
  readonly withdrawThresholdWei: bigint;
  /** How often ripe jobs are released; 0 leaves it to explicit `earnings.collect()` calls. */
  readonly releaseIntervalMs: number;
  /** Bounds on jobs started before they are mined; `DEFAULT_PENDING_JOB_BOUNDS` when omitted. */
  readonly pending?: PendingJobBounds;
}

export interface WorkerDependencies {
  readonly settings: WorkerSettings;
  readonly provider: JsonRpcProvider;
  readonly wallet: Wallet;
  /** Derives the session key vault's key; the keystore's password. */
  readonly password: string;
  readonly jobRegistryAddress: string;
  readonly workerRegistryAddress: string;
  readonly blobSource: BlobSource;
  readonly model: ModelBackend;
  /** The orchestrator's WorkerLink; without it the worker serves on chain only (no streaming). */
  readonly link?: WorkerLinkSettings;
  readonly logger: Logger;
}

export interface WorkerLinkSettings {
  /** `host:port` of the orchestrator's WorkerLink. */
  readonly target: string;
  /** TLS to the orchestrator (`resolveLinkTarget`); plaintext when unset. */
  readonly credentials?: ChannelCredentials;
  /** Redial backoff: exponential with full jitter (`linkBackoff`). */
  readonly backoff: RetryPolicy;
  readonly defaultHeartbeatMs: number;
  readonly software: string;
}

export interface WorkerStatus {
  readonly address: string;
  readonly models: readonly string[];
  readonly freeJobSlots: number;
  readonly freeSessionSlots: number;
  readonly runningJobs: number;
  readonly heldSessions: number;
  readonly draining: boolean;
}

/** A started worker: follows the chain, claims, serves and commits until drained or stopped. */
export interface RunningWorker {
  readonly address: string;
  readonly registration: RegistrationOutcome;
  readonly journal: FinalAnswerJournal;
  readonly follower: ChainEventFollower;
  /** The link to the orchestrator, when one is configured. */
  readonly link: WorkerLink | undefined;
  readonly earnings: EarningsCollector;
  /** Closes held sessions idle past the inactivity timeout (on its own timer, or `sweep()` in tests). */
  readonly idleSessions: IdleSessionCloser;
  readonly metrics: WorkerMetrics;
  status(): WorkerStatus;
  /** Routes frames to the worker link (or back to nowhere with undefined). */
  setAnswerChannel(channel: AnswerChannel | undefined): void;
  /** Claims nothing new and finishes the jobs in flight. */
  drain(): Promise<void>;
  /** Stops reading the chain and releases what it holds; drain first for a graceful stop. */
  stop(): Promise<void>;
}
