import { setTimeout as sleep } from 'node:timers/promises';
import { getBytes } from 'ethers';
import { signLinkChallenge, type LinkChallengeFields, type TypedDataSigner } from '@svc/chain';
import { retryDelayMs, type Logger, type RetryPolicy } from '@svc/platform';
import {
  AsyncQueue,
  closeClient,
  createClient,
  type ChannelCredentials,
  type ServiceClient,
} from '@svc/proto';
import {
  HintOutcome,
  WorkerLink as WorkerLinkService,
  type ConnectResponse,
  type LinkChallenge,
} from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import type { AnswerChannel } from '../jobs/answer-channel.js';
import type { DeltaFrame } from '../jobs/answer-stream.js';
import type { FinalAnswerJournal, SignedFinalAnswer } from '../jobs/final-answer-journal.js';
import type { PendingJobOffer } from '../jobs/pending-job-check.js';
import { chunkFrame, finalFrame, helloFrame, jobErrorFrame, type LinkRequest } from './link-frames.js';

/**
 * The link's redial backoff: exponential from `initialDelayMs` up to `maxDelayMs`, with full jitter (each
 * wait random in [0, ceiling]), so workers cut off together do not redial together.
 */
export function linkBackoff(initialDelayMs: number, maxDelayMs: number): RetryPolicy {
  return { initialDelayMs, maxDelayMs, multiplier: 2, jitter: 1 };
}

/** The worker's offer, read fresh for every heartbeat. */
export interface LinkOffer {
  readonly models: readonly string[];
  readonly freeJobSlots: number;
  readonly freeSessionSlots: number;
  /** Every session whose key the worker holds: the orchestrator pools only these after losing its store. */
  readonly heldSessions: readonly bigint[];
}

/** What the worker does with the orchestrator's hints; true when it takes the hint on. */
export interface LinkHintHandlers {
  sessionOpened(sessionId: bigint): Promise<boolean>;
  jobSubmitted(jobId: bigint, sessionId: bigint, blockNumber: number): Promise<boolean>;
  /** A submission handed over at broadcast, before it is mined; declined when unset. */
  pendingJob?(offer: PendingJobOffer): Promise<boolean>;
}

export interface WorkerLinkOptions {
  /** `host:port` of the orchestrator's WorkerLink. */
  readonly target: string;
  /** TLS to the orchestrator (`tlsChannelCredentials`); plaintext when unset. */
  readonly credentials?: ChannelCredentials;
  readonly worker: string;
  /**
   * The worker's key. On the link it signs nothing but an EIP-712 `LinkChallenge` it built itself from
   * the challenge's fields, after checking them (`signLinkChallenge`).
   */
  readonly signer: TypedDataSigner;
  /** The longest a challenge may stay valid for the worker to sign it (default `LINK_CHALLENGE_MAX_TTL_MS`). */
  readonly challengeMaxTtlMs?: number;
  readonly chainId: bigint;
  readonly jobRegistry: string;
  readonly offer: () => LinkOffer;
  readonly hints: LinkHintHandlers;
  readonly journal: FinalAnswerJournal;
  readonly backoff: RetryPolicy;
  /** Heartbeat period when the welcome names none. */
  readonly defaultHeartbeatMs: number;
  readonly software: string;
  readonly logger: Logger;
}

/** The orchestrator refused the link for a reason a redial will not fix soon. */
class LinkRefusedError extends Error {
  override readonly name = 'LinkRefusedError';
}

/**
 * The worker's end of the WorkerLink (docs/protocol.md, Worker link): dials, proves its address by
 * signing the challenge, heartbeats its offer, streams answer frames, re-sends every final the
 * orchestrator has not acknowledged as committed, and redials with backoff whenever the link drops.
 */
export class WorkerLink implements AnswerChannel {
  readonly #options: WorkerLinkOptions;
  readonly #client: ServiceClient<typeof WorkerLinkService.method>;
  readonly #stop = new AbortController();
  #outbound: AsyncQueue<LinkRequest> | undefined;
  #running: Promise<void> | undefined;
  #welcomed = false;

  constructor(options: WorkerLinkOptions) {
    this.#options = options;
    this.#client = createClient(
      WorkerLinkService,
      options.target,
      options.credentials ? { credentials: options.credentials } : {},
    );
  }

  /** Whether the orchestrator accepted this worker on the current connection. */
  get connected(): boolean {
    return this.#welcomed;
  }

  start(): void {
    this.#running ??= this.#dialForever();
  }

  async stop(): Promise<void> {
    this.#stop.abort();
    this.#outbound?.end();
    await this.#running;
    closeClient(this.#client);
  }

  sendDelta(delta: DeltaFrame): void {
    // A delta missed while the link is down is not replayed: the final carries the whole answer.
    this.#send(chunkFrame(delta));
  }

  sendFinal(answer: SignedFinalAnswer): void {
    // Saved in the journal already: if it cannot go now it goes after the next welcome.
    this.#send(finalFrame(answer));
  }

  sendError(jobId: bigint, attempt: number, reason: string): void {
    this.#send(jobErrorFrame(jobId, attempt, reason));
  }

  #send(frame: LinkRequest): void {
    if (this.#welcomed && this.#outbound && !this.#outbound.isEnded) this.#outbound.push(frame);
  }

  async #dialForever(): Promise<void> {
    const { logger } = this.#options;
    for (let failures = 0; !this.#stop.signal.aborted;) {
      try {
        const welcomed = await this.#connectOnce();
        failures = welcomed ? 0 : failures + 1;
        if (!this.#stop.signal.aborted) logger.warn('worker link closed; redialling');
      } catch (error) {
        failures += 1;
        if (this.#stop.signal.aborted) break;
        logger.warn({ err: error, failures }, 'worker link failed; redialling');
      }
      const refusedLong = failures > 0 ? failures : 0;
      try {
        await sleep(retryDelayMs(this.#options.backoff, refusedLong + 1), undefined, {
          signal: this.#stop.signal,
        });
      } catch {
        break;
      }
    }
  }

  /** One connection, from hello to its end; true when it got as far as the welcome. */
  async #connectOnce(): Promise<boolean> {
    const outbound = new AsyncQueue<LinkRequest>();
    this.#outbound = outbound;
    let heartbeat: NodeJS.Timeout | undefined;
    let welcomed = false;
    try {
      const inbound = this.#client.connect(outbound, { signal: this.#stop.signal });
      outbound.push(helloFrame(this.#options.worker, this.#options.software));
      for await (const response of inbound) {
        const frame = response.frame;
        switch (frame.case) {
          case 'challenge':
            outbound.push({
              frame: {
                case: 'challengeResponse',
                value: { signature: await this.#signChallenge(frame.value) },
              },
            });
            break;
          case 'welcome': {
            this.#checkWelcome(frame.value);
            welcomed = true;
            this.#welcomed = true;
            const interval = durationMs(frame.value.heartbeatInterval) ?? this.#options.defaultHeartbeatMs;
            this.#heartbeat(outbound);
            heartbeat = setInterval(() => this.#heartbeat(outbound), interval);
            await this.#resendFinals(outbound);
            this.#options.logger.info({ linkId: frame.value.linkId }, 'worker link up');
            break;
          }
          case 'sessionOpened':
          case 'jobSubmitted':
          case 'pendingJob':
            void this.#answerHint(outbound, frame);
            break;
          case 'finalAck':
            await this.#acknowledged(frame.value.jobId, frame.value.attempt, frame.value.committed);
            break;
          case 'frameRejection':
            this.#options.logger.warn(
              {
                jobId: frame.value.jobId,
                attempt: frame.value.attempt,
                seq: frame.value.seq,
                reason: frame.value.reason,
              },
              'worker link frame rejected',
            );
            break;
          case 'refusal':
            throw new LinkRefusedError(`link refused (${frame.value.reason}): ${frame.value.detail}`);
          default:
            break;
        }
      }
    } finally {
      if (heartbeat) clearInterval(heartbeat);
      this.#welcomed = false;
      outbound.end();
    }
    return welcomed;
  }

  /**
   * Signs the challenge as typed data, and only once its fields name this worker, its chain and its
   * JobRegistry and it expires soon but not yet: a challenge that is not that exact structure is refused
   * (the link ends and is redialled), so an orchestrator, or anyone between, gets no signature it chose.
   */
  async #signChallenge(challenge: LinkChallenge): Promise<Uint8Array> {
    const { expiresAt } = challenge;
    if (!expiresAt || expiresAt.nanos !== 0)
      throw new LinkRefusedError('link challenge refused: its expiry is not whole seconds');
    const fields: LinkChallengeFields = {
      orchestrator: challenge.orchestrator,
      chainId: challenge.chainId,
      jobRegistry: challenge.jobRegistry?.hex ?? '',
      worker: challenge.worker?.hex ?? '',
      nonce: challenge.nonce?.hex ?? '',
      expiresAt: expiresAt.seconds,
    };
    const { signer, chainId, jobRegistry, worker, challengeMaxTtlMs } = this.#options;
    const signature = await signLinkChallenge(signer, fields, {
      chainId,
      jobRegistry,
      worker,
      nowMs: Date.now(),
      ...(challengeMaxTtlMs !== undefined ? { maxTtlMs: challengeMaxTtlMs } : {}),
    });
    return getBytes(signature);
  }

  #checkWelcome(welcome: { chainId: bigint; jobRegistry?: { hex: string } | undefined }): void {
    const registry = welcome.jobRegistry?.hex.toLowerCase();
    if (welcome.chainId !== this.#options.chainId || registry !== this.#options.jobRegistry.toLowerCase()) {
      throw new LinkRefusedError(
        `the orchestrator works on chain ${welcome.chainId} / ${registry}, this worker on ${this.#options.chainId} / ${this.#options.jobRegistry}`,
      );
    }
  }

  #heartbeat(outbound: AsyncQueue<LinkRequest>): void {
    if (outbound.isEnded) return;
    const offer = this.#options.offer();
    outbound.push({
      frame: {
        case: 'heartbeat',
        value: {
          models: [...offer.models],
          freeJobSlots: offer.freeJobSlots,
          freeSessionSlots: offer.freeSessionSlots,
          heldSessionIds: offer.heldSessions.map(String),
          heldSessionsListed: true,
        },
      },
    });
  }

  async #resendFinals(outbound: AsyncQueue<LinkRequest>): Promise<void> {
    for (const answer of await this.#options.journal.all()) {
      if (!outbound.isEnded) outbound.push(finalFrame(answer));
    }
  }

  async #acknowledged(jobId: string, attempt: number, committed: boolean): Promise<void> {
    // Only an acknowledgement that saw the commitment lets the worker forget the answer.
    if (!committed) return;
    await this.#options.journal.update(BigInt(jobId), attempt, { acknowledged: true });
  }

  async #answerHint(
    outbound: AsyncQueue<LinkRequest>,
    frame: Extract<ConnectResponse['frame'], { case: 'sessionOpened' | 'jobSubmitted' | 'pendingJob' }>,
  ): Promise<void> {
    const { hints, logger } = this.#options;
    let accepted = false;
    try {
      if (frame.case === 'sessionOpened') accepted = await hints.sessionOpened(BigInt(frame.value.sessionId));
      else if (frame.case === 'jobSubmitted')
        accepted = await hints.jobSubmitted(
          BigInt(frame.value.jobId),
          BigInt(frame.value.sessionId),
          Number(frame.value.blockNumber),
        );
      else if (hints.pendingJob)
        accepted = await hints.pendingJob({
          jobId: BigInt(frame.value.jobId),
          sessionId: BigInt(frame.value.sessionId),
          attempt: frame.value.attempt,
          rawTransaction: frame.value.rawTransaction,
          blob: frame.value.blob,
          commitment: frame.value.kzgCommitment,
        });
    } catch (error) {
      logger.warn({ err: error, hint: frame.case }, 'worker link hint could not be handled');
    }
    if (outbound.isEnded) return;
    outbound.push({
      frame: {
        case: 'hintAck',
        value: {
          hintId: frame.value.hintId,
          outcome: accepted ? HintOutcome.ACCEPTED : HintOutcome.DECLINED,
          detail: accepted ? '' : 'not taken on',
        },
      },
    });
  }
}

function durationMs(duration: { seconds: bigint; nanos: number } | undefined): number | undefined {
  if (!duration) return undefined;
  const ms = Number(duration.seconds) * 1000 + Math.floor(duration.nanos / 1e6);
  return ms > 0 ? ms : undefined;
}
