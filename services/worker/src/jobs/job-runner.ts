import {
  AnswerFrameKind,
  chainTimeNow,
  ContractRevertError,
  JobState,
  encryptAnswerFrame,
  responseHashOf,
  signFinalAnswer,
  type ChainClient,
  type Job,
  type TypedDataSigner,
} from '@svc/chain';
import type { Logger } from '@svc/platform';
import { keccak256, toUtf8Bytes } from 'ethers';
import { setTimeout as sleep } from 'node:timers/promises';
import type { WorkerTransactions } from '../chain/worker-transactions.js';
import type { ModelBackend } from '../model/model-backend.js';
import type { SessionKeyVault } from '../sessions/session-key-vault.js';
import type { AnswerChannel } from './answer-channel.js';
import { streamAnswer, type StreamedAnswer } from './answer-stream.js';
import type { FinalAnswerJournal, SignedFinalAnswer } from './final-answer-journal.js';
import { JobRefusedError } from './job-refusal.js';
import type { PromptReader } from './prompt-reader.js';

const COMMIT_TRIES = 5;
const COMMIT_RETRY_DELAY_MS = 1_000;

/** A job as the chain announced it to this worker (JobSubmitted or JobReassigned). */
export interface JobAssignment {
  readonly jobId: bigint;
  /** The session the announcement named (the job's session on chain is what counts). */
  readonly sessionId: bigint;
  /** Block of the announcing transaction: where its prompt blob lives. */
  readonly blockNumber: number;
}

export type JobOutcome = 'completed' | 'failed' | 'not-ours' | 'abandoned';

export interface JobDeadlineGuards {
  /** A job with less time than this until its deadline is failed at once instead of started. */
  readonly minRunSeconds: number;
  /** Time kept back before the deadline for `completeJob` to be mined; generation stops there. */
  readonly commitMarginSeconds: number;
}

export interface JobRunnerOptions {
  readonly chain: ChainClient;
  readonly transactions: WorkerTransactions;
  readonly worker: string;
  readonly signer: TypedDataSigner;
  readonly chainId: bigint;
  readonly vault: SessionKeyVault;
  readonly prompts: PromptReader;
  readonly model: ModelBackend;
  readonly journal: FinalAnswerJournal;
  readonly channel: () => AnswerChannel;
  /** Whether a committed final stays saved until the orchestrator acknowledges it (a link is configured). */
  readonly keepUntilAcknowledged: () => boolean;
  readonly guards: JobDeadlineGuards;
  readonly coalesceMs: number;
  readonly maxDeltaChars: number;
  readonly logger: Logger;
}

/**
 * Serves one job: checks it on chain, reads its prompt, runs the model while streaming encrypted
 * deltas, saves the signed final durably, sends it and commits its hash with `completeJob` before
 * the deadline. A job it cannot serve is failed at once, so the service can reassign it.
 */
export class JobRunner {
  readonly #options: JobRunnerOptions;

  constructor(options: JobRunnerOptions) {
    this.#options = options;
  }

  /** Fails a job this worker will not start (no free slot, draining), if it is still ours to fail. */
  async refuse(assignment: JobAssignment, reason: string): Promise<void> {
    const job = await this.#options.chain.getJob(assignment.jobId);
    if (job.state !== JobState.Submitted || job.worker.toLowerCase() !== this.#options.worker.toLowerCase())
      return;
    this.#options.logger.warn({ jobId: job.jobId.toString(), reason }, 'job refused');
    this.#options.channel().sendError(job.jobId, job.attempt, reason);
    await this.#fail(job);
  }

  async run(assignment: JobAssignment, signal: AbortSignal): Promise<JobOutcome> {
    const { chain, worker, journal } = this.#options;
    const job = await chain.getJob(assignment.jobId);
    if (job.state !== JobState.Submitted || job.worker.toLowerCase() !== worker.toLowerCase())
      return 'not-ours';
    const saved = await journal.get(job.jobId, job.attempt);
    // A final answer already made for this attempt is committed as it is, never regenerated.
    if (saved) return this.commit(saved);
    const logger = this.#options.logger.child({ jobId: job.jobId.toString(), attempt: job.attempt });
    let answer: SignedFinalAnswer;
    try {
      answer = await this.#serve(job, assignment, signal);
    } catch (error) {
      // Anything but a refusal is this worker's own trouble (an RPC outage, say); the job still fails at once.
      const reason = error instanceof JobRefusedError ? error.reason : 'internal_error';
      logger.warn({ reason, err: error }, 'job failed');
      this.#options.channel().sendError(job.jobId, job.attempt, reason);
      await this.#fail(job);
      return 'failed';
    }
    // From here the answer exists: an outage is retried, never turned into a failJob.
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.commit(answer);
      } catch (error) {
        if (attempt >= COMMIT_TRIES) throw error;
        logger.warn({ err: error, attempt }, 'committing the answer failed; retrying');
        await sleep(COMMIT_RETRY_DELAY_MS);
      }
    }
  }

  /** Commits a saved final answer unless that can only revert; true once the chain holds it. */
  async commit(answer: SignedFinalAnswer): Promise<JobOutcome> {
    const { chain, transactions, journal } = this.#options;
    const now = await chainTimeNow(chain.provider);
    // The next block is at least a second later, and `completeJob` reverts past the deadline.
    if (now + 1 > answer.deadline) {
      const job = await chain.getJob(answer.jobId);
      if (!isOurCommitment(job, answer)) {
        await journal.remove(answer.jobId, answer.attempt);
        return 'abandoned';
      }
    } else {
      try {
        await transactions.completeJob(answer.jobId, answer.commitHash);
      } catch (error) {
        if (!(error instanceof ContractRevertError)) throw error;
        // A restart between the commit being mined and the journal noting it lands here.
        const job = await chain.getJob(answer.jobId);
        if (!isOurCommitment(job, answer)) {
          await journal.remove(answer.jobId, answer.attempt);
          return 'abandoned';
        }
      }
    }
    await journal.update(
      answer.jobId,
      answer.attempt,
      { committed: true },
      !this.#options.keepUntilAcknowledged(),
    );
    return 'completed';
  }

  async #serve(job: Job, assignment: JobAssignment, signal: AbortSignal): Promise<SignedFinalAnswer> {
    const { chain, guards } = this.#options;
    const now = await chainTimeNow(chain.provider);
    const secondsLeft = job.deadline - now;
    if (secondsLeft < guards.minRunSeconds) {
      throw new JobRefusedError('deadline_too_close', `only ${secondsLeft} s left before the deadline`);
    }
    const session = await chain.getSession(job.sessionId);
    const keyPair = await this.#options.vault.get(job.sessionId);
    if (!keyPair) throw new JobRefusedError('no_session_key', 'this worker holds no key for the session');
    const prompt = await this.#options.prompts.read(job, session, keyPair, assignment.blockNumber);

    const stopAt = (secondsLeft - guards.commitMarginSeconds) * 1000;
    const generation = AbortSignal.any([signal, AbortSignal.timeout(Math.max(stopAt, 0))]);
    const channel = this.#options.channel();
    let streamed: StreamedAnswer;
    try {
      streamed = await streamAnswer(
        this.#options.model.generate({ model: prompt.model, messages: prompt.messages, signal: generation }),
        {
          jobId: job.jobId,
          attempt: job.attempt,
          replyKey: prompt.replyKey,
          onDelta: (delta) => channel.sendDelta(delta),
          coalesceMs: this.#options.coalesceMs,
          maxDeltaChars: this.#options.maxDeltaChars,
        },
      );
    } catch (error) {
      throw new JobRefusedError('model_failed', 'the model did not finish the answer', { cause: error });
    }
    const position = { jobId: job.jobId, attempt: job.attempt, seq: streamed.deltas };
    const frame = encryptAnswerFrame(AnswerFrameKind.Final, streamed.text, prompt.replyKey, position);
    // The attempt and session as the chain holds them: a final of an attempt that missed its deadline
    // must not be usable against a later attempt this worker answers honestly.
    const binding = {
      chainId: this.#options.chainId,
      jobRegistry: chain.addresses.jobRegistry,
      jobId: job.jobId,
      attempt: job.attempt,
      sessionId: job.sessionId,
    };
    const answer: SignedFinalAnswer = {
      jobId: job.jobId,
      attempt: job.attempt,
      sessionId: job.sessionId,
      seq: streamed.deltas,
      frame,
      signature: await signFinalAnswer(this.#options.signer, binding, frame),
      commitHash: streamed.commitMismatchedHash
        ? keccak256(toUtf8Bytes(`mismatched commitment of job ${job.jobId}`))
        : responseHashOf(frame),
      deadline: job.deadline,
      committed: false,
      acknowledged: false,
    };
    // Durable before it leaves the process: after a crash it is re-sent and committed, not remade.
    await this.#options.journal.save(answer);
    channel.sendFinal(answer);
    return answer;
  }

  async #fail(job: Job): Promise<void> {
    try {
      await this.#options.transactions.failJob(job.jobId);
    } catch (error) {
      // Already failed, timed out or reassigned: the chain moved on without us.
      if (!(error instanceof ContractRevertError)) throw error;
      this.#options.logger.info(
        { jobId: job.jobId.toString(), revert: error.revert.name },
        'failJob refused',
      );
    }
  }
}

function isOurCommitment(job: Job, answer: SignedFinalAnswer): boolean {
  return (
    job.attempt === answer.attempt &&
    job.state !== JobState.Submitted &&
    job.state !== JobState.Failed &&
    job.responseHash.toLowerCase() === answer.commitHash.toLowerCase()
  );
}
