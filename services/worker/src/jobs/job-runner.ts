import {
  AnswerFrameKind,
  chainTimeNow,
  ContractRevertError,
  TransactionRevertedError,
  JobState,
  encryptAnswerFrame,
  responseHashOf,
  signFinalAnswer,
  type ChainClient,
  type Job,
  type Prompt,
  type PromptPlace,
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
import {
  checkPendingJob,
  PendingJobRejectedError,
  UnconfirmedWork,
  type PendingJobOffer,
} from './pending-job-check.js';
import type { PromptReader } from './prompt-reader.js';

const COMMIT_TRIES = 5;
const COMMIT_RETRY_DELAY_MS = 1_000;
/** Looks for a job's prompt place: its event may reach this node's logs a moment after its state. */
const PROMPT_PLACE_TRIES = 3;
const PROMPT_PLACE_RETRY_DELAY_MS = 500;

/** A job as the chain announced it to this worker (JobSubmitted or JobReassigned). */
export interface JobAssignment {
  readonly jobId: bigint;
  /** The session the announcement named (the job's session on chain is what counts). */
  readonly sessionId: bigint;
  /** Block of the announcing transaction: where its prompt blob lives. */
  readonly blockNumber: number;
}

export type JobOutcome = 'completed' | 'failed' | 'not-ours' | 'abandoned' | 'not-mined' | 'replaced';

/** Bounds on work started before a job is mined (docs/protocol.md, Starting before inclusion). */
export interface PendingJobBounds {
  /** Blocks after the offer within which the job must be mined; then the worker gives up and reports. */
  readonly maxBlocks: number;
  /** Unconfirmed jobs at once over the link (one per session in any case). */
  readonly perLink: number;
  /** How often the chain is asked whether the job landed. */
  readonly pollMs: number;
  /** How long an answer made for a job that never landed is kept, should it land late (seconds). */
  readonly keepSeconds: number;
}

export const DEFAULT_PENDING_JOB_BOUNDS: PendingJobBounds = {
  maxBlocks: 5,
  perLink: 2,
  pollMs: 250,
  keepSeconds: 900,
};

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
  readonly pending?: PendingJobBounds;
  readonly logger: Logger;
}

/**
 * Serves one job: checks it on chain, reads its prompt, runs the model while streaming encrypted
 * deltas, saves the signed final durably, sends it and commits its hash with `completeJob` before
 * the deadline. A job it cannot serve is failed at once, so the service can reassign it.
 */
export class JobRunner {
  readonly #options: JobRunnerOptions;
  readonly #bounds: PendingJobBounds;
  readonly #unconfirmed: UnconfirmedWork;
  /**
   * Jobs started before inclusion: the chain's announcement of one joins it instead of starting again.
   * `answered` settles once the model is done with it (its answer made, or given up).
   */
  readonly #pending = new Map<bigint, { outcome: Promise<JobOutcome>; answered: Promise<void> }>();
  /**
   * Offers still being checked. The chain's announcement of such a job (with instant blocks it may come
   * while the offer's own reads are out) waits for the decision: it joins the run the offer starts, and only
   * a declined offer leaves the job to run as usual. Without the wait both would answer it, and the caller
   * would see two generations' deltas.
   */
  readonly #offering = new Map<bigint, Promise<void>>();

  constructor(options: JobRunnerOptions) {
    this.#options = options;
    this.#bounds = options.pending ?? DEFAULT_PENDING_JOB_BOUNDS;
    this.#unconfirmed = new UnconfirmedWork({ perLink: this.#bounds.perLink });
  }

  /** Unconfirmed jobs running now. */
  get unconfirmedJobs(): number {
    return this.#unconfirmed.size;
  }

  /**
   * Takes on a job handed over at broadcast, before it is mined (docs/protocol.md, Starting before
   * inclusion): checks it without the block, then answers it at once. Resolves `accepted` false (and
   * the reason) when it is refused, before anything is generated; `outcome` resolves once the job was
   * committed, given up (`not-mined`) or found replaced by another blob (`replaced`).
   */
  async offerPending(
    offer: PendingJobOffer,
    signal: AbortSignal,
  ): Promise<{ accepted: true; outcome: Promise<JobOutcome> } | { accepted: false; reason: string }> {
    const deciding = this.#decideOffer(offer, signal);
    const decided = deciding.then(
      () => undefined,
      () => undefined,
    );
    this.#offering.set(offer.jobId, decided);
    try {
      return await deciding;
    } finally {
      if (this.#offering.get(offer.jobId) === decided) this.#offering.delete(offer.jobId);
    }
  }

  async #decideOffer(
    offer: PendingJobOffer,
    signal: AbortSignal,
  ): Promise<{ accepted: true; outcome: Promise<JobOutcome> } | { accepted: false; reason: string }> {
    const { chain, worker, chainId, vault, prompts } = this.#options;
    let prompt: Prompt;
    let checked;
    try {
      if (this.#pending.has(offer.jobId))
        throw new PendingJobRejectedError('bound_reached', 'already pending');
      // Mined already (or a job of that id exists): the chain's announcement runs it as usual. Read
      // beside the checks' own reads and commitment check, so the round trips overlap.
      const known = Promise.all([
        chain.getJob(offer.jobId),
        this.#options.journal.get(offer.jobId, offer.attempt),
      ]);
      known.catch(() => undefined);
      const checking = checkPendingJob(offer, {
        chainId,
        jobRegistry: chain.addresses.jobRegistry,
        worker,
        getSession: (id) => chain.getSession(id),
        principalOf: (account) => chain.principalOf(account),
        isDelegateAuthorized: (user, delegate) => chain.isDelegateAuthorized(user, delegate),
        commitsTo: (blob, commitment) => this.#options.prompts.commitsTo(blob, commitment),
      });
      checking.catch(() => undefined);
      const [onChain, answered] = await known;
      if (onChain.state !== JobState.None) return { accepted: false, reason: 'already_on_chain' };
      if (answered) return { accepted: false, reason: 'already_answered' };
      checked = await checking;
      const keyPair = await vault.get(checked.sessionId);
      if (!keyPair) throw new JobRefusedError('no_session_key', 'this worker holds no key for the session');
      prompt = prompts.open(offer.blob, checked.promptIndex, checked.sessionId, checked.session, keyPair);
      await this.#takeUnconfirmed(checked.jobId, checked.sessionId);
    } catch (error) {
      if (error instanceof PendingJobRejectedError || error instanceof JobRefusedError) {
        this.#options.logger.warn(
          { jobId: offer.jobId.toString(), reason: error.reason, detail: error.message },
          'pending job refused',
        );
        return { accepted: false, reason: error.reason };
      }
      throw error;
    }
    const target = checked;
    let markAnswered!: () => void;
    const answered = new Promise<void>((resolve) => (markAnswered = resolve));
    const outcome = this.#runPending(target, prompt, signal, markAnswered).finally(() => {
      markAnswered();
      this.#unconfirmed.release(target.jobId);
      this.#pending.delete(target.jobId);
    });
    this.#pending.set(target.jobId, { outcome, answered });
    return { accepted: true, outcome };
  }

  /**
   * Counts the job as unconfirmed work, or refuses it (`bound_reached`). The session's previous job may be
   * on chain already, unseen by this worker's poll yet (the service hands over the session's next job as
   * soon as it sees the last one land): then it gives its place instead of turning the offer down.
   */
  async #takeUnconfirmed(jobId: bigint, sessionId: bigint): Promise<void> {
    try {
      this.#unconfirmed.take(jobId, sessionId);
    } catch (error) {
      const previous = this.#unconfirmed.inSession(sessionId);
      if (!(error instanceof PendingJobRejectedError) || previous === undefined || previous === jobId)
        throw error;
      if ((await this.#options.chain.getJob(previous)).state === JobState.None) throw error;
      this.#unconfirmed.release(previous);
      this.#unconfirmed.take(jobId, sessionId);
    }
  }

  async #runPending(
    target: { jobId: bigint; sessionId: bigint; promptBlobHash: string; promptIndex: number },
    prompt: Prompt,
    signal: AbortSignal,
    answered: () => void,
  ): Promise<JobOutcome> {
    const { chain, logger: parent } = this.#options;
    const logger = parent.child({ jobId: target.jobId.toString(), attempt: 1, pending: true });
    // Generation starts at once; the block and the chain's clock (where the bounds count from) are read
    // meanwhile.
    const startBlock = chain.provider.getBlockNumber();
    const forgetAt = chainTimeNow(chain.provider).then((chainNow) => chainNow + this.#bounds.keepSeconds);
    // Awaited below (the clock by the answer's end): a failed read fails what awaits it, not the process.
    startBlock.catch(() => undefined);
    forgetAt.catch(() => undefined);
    const giveUp = new AbortController();
    let answer: SignedFinalAnswer | undefined;
    const answering = this.#answer(
      { ...target, attempt: 1, deadline: forgetAt, pending: true },
      prompt,
      AbortSignal.any([signal, giveUp.signal]),
    ).then(
      (made) => (answer = made),
      (error: unknown) => {
        logger.warn({ err: error }, 'answering a pending job failed');
        return undefined;
      },
    );
    let job: Job | undefined;
    try {
      job = await this.#awaitInclusion(
        target.jobId,
        await startBlock,
        AbortSignal.any([signal, giveUp.signal]),
      );
    } catch (error) {
      giveUp.abort(error);
      await answering;
      throw error;
    }
    if (!job) {
      // Not mined within the bound: stop, report, keep any signed answer for a late landing of this blob.
      giveUp.abort(new Error('the job was not mined in time'));
      await answering;
      logger.warn({ maxBlocks: this.#bounds.maxBlocks }, 'pending job not mined; given up');
      this.#options.channel().sendError(target.jobId, 1, 'not_mined');
      return 'not-mined';
    }
    // On chain now: it no longer counts as unconfirmed work (the session's next job may be offered while
    // this one is still being answered or committed), and generation stops in time for `completeJob`.
    this.#unconfirmed.release(target.jobId);
    const secondsLeft = job.deadline - (await chainTimeNow(chain.provider));
    const stopTimer = setTimeout(
      () => giveUp.abort(new Error('the deadline is near')),
      Math.max(secondsLeft - this.#options.guards.commitMarginSeconds, 0) * 1000,
    );
    try {
      await answering;
    } finally {
      clearTimeout(stopTimer);
    }
    answered();
    if (!answer) {
      // The model failed; the job is on chain now, so it is failed like any other.
      if (isOurs(job, this.#options.worker) && job.attempt === 1) {
        this.#options.channel().sendError(job.jobId, job.attempt, 'model_failed');
        await this.#fail(job);
      }
      return 'failed';
    }
    return this.#commitLanded(answer, job);
  }

  /** The job of a pending answer is on chain: commit it only for the very blob it answered. */
  async #commitLanded(answer: SignedFinalAnswer, job: Job): Promise<JobOutcome> {
    const { journal } = this.#options;
    if (!isOurs(job, this.#options.worker) || job.attempt !== answer.attempt) {
      await journal.remove(answer.jobId, answer.attempt);
      return 'not-ours';
    }
    // No event naming the landed prompt: not this answer's job to commit (a failed read is thrown).
    const landed = await this.#promptPlace(job).catch((error: unknown) => {
      if (error instanceof JobRefusedError) return undefined;
      throw error;
    });
    if (
      landed?.promptBlobHash.toLowerCase() !== answer.promptBlobHash?.toLowerCase() ||
      landed?.promptIndex !== (answer.promptIndex ?? 0)
    ) {
      // A replacement with another prompt landed under the same id: this answer is not its answer, and
      // a second final for the same attempt is never signed. The job is failed (so it can be reassigned).
      this.#options.logger.warn({ jobId: job.jobId.toString() }, 'pending job replaced by another blob');
      await journal.remove(answer.jobId, answer.attempt);
      this.#options.channel().sendError(job.jobId, job.attempt, 'replaced');
      await this.#fail(job);
      return 'replaced';
    }
    const confirmed: SignedFinalAnswer = { ...answer, deadline: job.deadline, pending: false };
    await journal.save(confirmed);
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.commit(confirmed);
      } catch (error) {
        if (attempt >= COMMIT_TRIES) throw error;
        await sleep(COMMIT_RETRY_DELAY_MS);
      }
    }
  }

  /** The job once it is on chain, or undefined after `maxBlocks` blocks without it (or an abort). */
  async #awaitInclusion(jobId: bigint, startBlock: number, signal: AbortSignal): Promise<Job | undefined> {
    const { chain } = this.#options;
    while (!signal.aborted) {
      const job = await chain.getJob(jobId);
      if (job.state !== JobState.None) return job;
      const block = await chain.provider.getBlockNumber();
      if (block - startBlock >= this.#bounds.maxBlocks) return undefined;
      try {
        await sleep(this.#bounds.pollMs, undefined, { signal });
      } catch {
        return undefined;
      }
    }
    return undefined;
  }

  /**
   * Fails a job this worker will not start (no free slot, draining), if it is still ours to fail. A job it
   * answered already (before inclusion, or before a restart) is committed instead: that takes no slot, and
   * its caller may have the signed final already.
   */
  async refuse(assignment: JobAssignment, reason: string): Promise<void> {
    await this.#offering.get(assignment.jobId);
    const pending = this.#pending.get(assignment.jobId);
    if (pending) {
      await pending.outcome;
      return;
    }
    const job = await this.#options.chain.getJob(assignment.jobId);
    if (job.state !== JobState.Submitted || job.worker.toLowerCase() !== this.#options.worker.toLowerCase())
      return;
    if (await this.#commitAnswered(job)) return;
    this.#options.logger.warn({ jobId: job.jobId.toString(), reason }, 'job refused');
    this.#options.channel().sendError(job.jobId, job.attempt, reason);
    await this.#fail(job);
  }

  /**
   * Runs an announced job to its outcome; `answered` is called once the model is done with it, so the
   * scheduler's slot serves the next job while the commitment is batched and mined.
   */
  async run(
    assignment: JobAssignment,
    signal: AbortSignal,
    answered: () => void = () => {},
  ): Promise<JobOutcome> {
    const { chain, worker } = this.#options;
    // Started before inclusion: that run commits it (or refuses a replacement).
    await this.#offering.get(assignment.jobId);
    const pending = this.#pending.get(assignment.jobId);
    if (pending) {
      void pending.answered.then(answered);
      return pending.outcome;
    }
    const job = await chain.getJob(assignment.jobId);
    if (job.state !== JobState.Submitted || job.worker.toLowerCase() !== worker.toLowerCase())
      return 'not-ours';
    const committed = await this.#commitAnswered(job);
    if (committed) return committed;
    const logger = this.#options.logger.child({ jobId: job.jobId.toString(), attempt: job.attempt });
    let answer: SignedFinalAnswer;
    try {
      answer = await this.#serve(job, assignment, signal);
      answered();
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

  /**
   * A final answer already made for this attempt is committed as it is, never regenerated (one made before
   * inclusion only for the blob it answered); undefined when there is none.
   */
  async #commitAnswered(job: Job): Promise<JobOutcome | undefined> {
    const saved = await this.#options.journal.get(job.jobId, job.attempt);
    if (!saved) return undefined;
    return saved.pending ? this.#commitLanded(saved, job) : this.commit(saved);
  }

  /** Commits a saved final answer unless that can only revert; true once the chain holds it. */
  async commit(answer: SignedFinalAnswer): Promise<JobOutcome> {
    const { chain, transactions, journal } = this.#options;
    const now = await chainTimeNow(chain.provider);
    if (answer.pending) {
      // Made before inclusion: committed once its job lands (with its blob), forgotten after a while.
      const job = await chain.getJob(answer.jobId);
      if (job.state !== JobState.None) return this.#commitLanded(answer, job);
      if (now > answer.deadline) await journal.remove(answer.jobId, answer.attempt);
      return 'abandoned';
    }
    // The next block is at least a second later, and `completeJob` reverts past the deadline.
    if (now + 1 > answer.deadline) {
      const job = await chain.getJob(answer.jobId);
      if (!(await this.#isOurCommitment(job, answer))) {
        await journal.remove(answer.jobId, answer.attempt);
        return 'abandoned';
      }
    } else {
      try {
        await transactions.completeJob(answer.jobId, answer.commitHash);
      } catch (error) {
        if (!(error instanceof ContractRevertError || error instanceof TransactionRevertedError)) throw error;
        // A restart between the commit being mined and the journal noting it lands here, and so does a
        // second commit of the same answer made while the first was on its way.
        const job = await chain.getJob(answer.jobId);
        if (!(await this.#isOurCommitment(job, answer))) {
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

  /**
   * Where a Submitted job's prompt lies: JobRegistry keeps only its place in the blob, the blob being named
   * by the job's latest `JobSubmitted` or `JobReassigned` (from `fromBlock`, the announcing block, if known).
   */
  async #promptPlace(job: Job, fromBlock?: number): Promise<PromptPlace> {
    for (let attempt = 1; ; attempt += 1) {
      const place = await this.#options.chain.promptPlaceOf(job, fromBlock);
      if (place) return place;
      if (attempt >= PROMPT_PLACE_TRIES)
        throw new JobRefusedError('blob_unavailable', "no event of the job names its prompt's blob");
      await sleep(PROMPT_PLACE_RETRY_DELAY_MS);
    }
  }

  /** Whether the chain holds this answer as the job's commitment (a completed job's `JobCompleted`). */
  async #isOurCommitment(job: Job, answer: SignedFinalAnswer): Promise<boolean> {
    if (job.attempt !== answer.attempt || job.state === JobState.Submitted || job.state === JobState.Failed)
      return false;
    const commitment = await this.#options.chain.commitmentOf(job);
    return commitment?.responseHash.toLowerCase() === answer.commitHash.toLowerCase();
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
    const place = await this.#promptPlace(job, assignment.blockNumber);
    const prompt = await this.#options.prompts.read(place, job.sessionId, session, keyPair);

    const stopAt = (secondsLeft - guards.commitMarginSeconds) * 1000;
    return this.#answer(
      { jobId: job.jobId, attempt: job.attempt, sessionId: job.sessionId, deadline: job.deadline },
      prompt,
      AbortSignal.any([signal, AbortSignal.timeout(Math.max(stopAt, 0))]),
    );
  }

  /**
   * Runs the model on the prompt, streaming sealed deltas, then signs the final, saves it durably and
   * sends it. The final is bound to the job, attempt and session (never the blob: see
   * {@link runPending} for how an answer made before inclusion is kept off a replacement).
   */
  async #answer(
    target: {
      jobId: bigint;
      attempt: number;
      sessionId: bigint;
      /** Awaited only once the answer is made (a pending job's is read while it generates). */
      deadline: number | Promise<number>;
      promptBlobHash?: string;
      promptIndex?: number;
      pending?: boolean;
    },
    prompt: Prompt,
    generation: AbortSignal,
  ): Promise<SignedFinalAnswer> {
    const { chain } = this.#options;
    const channel = this.#options.channel();
    let streamed: StreamedAnswer;
    try {
      streamed = await streamAnswer(
        this.#options.model.generate({ model: prompt.model, messages: prompt.messages, signal: generation }),
        {
          jobId: target.jobId,
          attempt: target.attempt,
          replyKey: prompt.replyKey,
          onDelta: (delta) => channel.sendDelta(delta),
          coalesceMs: this.#options.coalesceMs,
          maxDeltaChars: this.#options.maxDeltaChars,
        },
      );
    } catch (error) {
      throw new JobRefusedError('model_failed', 'the model did not finish the answer', { cause: error });
    }
    const position = { jobId: target.jobId, attempt: target.attempt, seq: streamed.deltas };
    const frame = encryptAnswerFrame(AnswerFrameKind.Final, streamed.text, prompt.replyKey, position);
    // The attempt and session as the chain holds them: a final of an attempt that missed its deadline
    // must not be usable against a later attempt this worker answers honestly.
    const binding = {
      chainId: this.#options.chainId,
      jobRegistry: chain.addresses.jobRegistry,
      jobId: target.jobId,
      attempt: target.attempt,
      sessionId: target.sessionId,
    };
    const answer: SignedFinalAnswer = {
      jobId: target.jobId,
      attempt: target.attempt,
      sessionId: target.sessionId,
      seq: streamed.deltas,
      frame,
      signature: await signFinalAnswer(this.#options.signer, binding, frame),
      commitHash: streamed.commitMismatchedHash
        ? keccak256(toUtf8Bytes(`mismatched commitment of job ${target.jobId}`))
        : responseHashOf(frame),
      deadline: await target.deadline,
      committed: false,
      acknowledged: false,
      ...(target.promptBlobHash !== undefined ? { promptBlobHash: target.promptBlobHash } : {}),
      ...(target.promptIndex !== undefined ? { promptIndex: target.promptIndex } : {}),
      ...(target.pending ? { pending: true } : {}),
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

function isOurs(job: Job, worker: string): boolean {
  return job.state === JobState.Submitted && job.worker.toLowerCase() === worker.toLowerCase();
}
