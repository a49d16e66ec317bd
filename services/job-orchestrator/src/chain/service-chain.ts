import type { Interface, Provider, TransactionReceipt } from 'ethers';
import {
  BLOB_CAPACITY_BYTES,
  BlobFeeTooHighError,
  CallBatcher,
  ContractRevertError,
  TransactionRevertedError,
  framedLength,
  provingBlobSidecarOf,
  SharedChainTime,
  decodeProtocolLog,
  type BatchEntry,
  type BatchPolicy,
  type ProvingBlobSidecar,
  type SignedTransaction,
  type ChainClient,
  type Commitment,
  type Job,
  type ContractError,
  type ProtocolEvent,
  type ProtocolEventName,
  type ProtocolEventOf,
  type TransactionSender,
} from '@svc/chain';
import { decodeRevertData, withDecodedRevert } from '@svc/contracts';
import { AppError } from '@svc/platform';
import type { JobOrchestratorMetrics } from '../observability/job-orchestrator-metrics.js';

/** How far back a submission whose send failed is looked for (about 3.4 hours of 12 s blocks). */
const LANDED_LOOKBACK_BLOCKS = 1_024;
/** How old a latest block `now()` judges deadlines by may be: they are judged at most this late. */
const CHAIN_TIME_MAX_AGE_MS = 1_000;

/**
 * A submission that may have been broadcast and was not found on chain: it may still land. `promptBlobHash`
 * and `promptIndex` name it: the job it becomes carries that prompt.
 */
export class SubmissionOutcomeUnknownError extends Error {
  constructor(
    readonly sessionId: bigint,
    readonly promptBlobHash: string,
    readonly promptIndex: number,
    cause: unknown,
  ) {
    super(
      `the submission of prompt ${promptIndex} of blob ${promptBlobHash} in session ${sessionId} has no known outcome`,
      { cause },
    );
    this.name = 'SubmissionOutcomeUnknownError';
  }
}

/** A submission signed and being broadcast, not yet mined (`signedTransaction` absent when only seen mined). */
export interface SignedSubmission {
  readonly jobId: bigint;
  readonly hash: string;
  /** The signed transaction without its sidecar, for the worker to check before inclusion. */
  readonly signedTransaction?: string;
  /** The blob the job's prompt travels in (shared with the other jobs of its batch), and its place there. */
  readonly blob: ProvingBlobSidecar;
  readonly promptIndex: number;
  readonly landed: Promise<{ jobId: bigint; fee: bigint; tx: ServiceTransaction }>;
}

/**
 * Told a job's id before its transaction is signed, so its caller can record the job where it outlives the
 * caller; a rejection leaves the job out of its batch, nothing of it sent.
 */
export type BeforeSigning = (jobId: bigint) => Promise<void>;

/** A job submission waiting for its batch. */
interface SubmissionRequest {
  readonly payer: string;
  readonly sessionId: bigint;
  readonly maxFee: bigint;
  readonly promptWire: Uint8Array;
  readonly beforeSigning: BeforeSigning | undefined;
}

/**
 * A transaction the service sent, mined, with the protocol events it emitted (for one job of a batch,
 * the events about that job).
 */
export interface ServiceTransaction {
  readonly hash: string;
  readonly blockNumber: number;
  readonly events: readonly ProtocolEvent[];
}

/**
 * The service's writes to JobRegistry, acting for its principal from the operator lanes: blob-carrying
 * submissions from the blob lane, everything else from the plain lane. Every write is simulated before
 * it is signed (TransactionSender), so a refusal is a ContractRevertError and nothing was sent.
 */
export class ServiceChain {
  readonly #submissions: CallBatcher<SubmissionRequest, SignedSubmission>;
  readonly #chainTime: SharedChainTime;

  constructor(
    readonly reads: ChainClient,
    private readonly sender: TransactionSender,
    /** The service's principal: the delegate wallets authorize and the owner of per-call sessions. */
    readonly principal: string,
    private readonly metrics: JobOrchestratorMetrics,
    batches: BatchPolicy,
  ) {
    this.#chainTime = new SharedChainTime(reads.provider, CHAIN_TIME_MAX_AGE_MS);
    this.#submissions = new CallBatcher(
      batches,
      (request) => framedLength(request.promptWire),
      BLOB_CAPACITY_BYTES,
      (entries) => this.#submitBatch(entries),
    );
  }

  get jobRegistry(): string {
    return this.reads.addresses.jobRegistry;
  }

  get provider(): Provider {
    return this.reads.provider;
  }

  async openSession(
    owner: string,
    modelId: string,
    worker: string,
  ): Promise<{ sessionId: bigint; claimDeadline: number; tx: ServiceTransaction }> {
    const tx = await this.#send('openSession', [owner, modelId, worker]);
    const opened = only(tx, 'SessionOpened');
    return { sessionId: opened.args.sessionId, claimDeadline: Number(opened.args.claimDeadline), tx };
  }

  closeSession(sessionId: bigint): Promise<ServiceTransaction> {
    return this.#send('closeSession', [sessionId]);
  }

  /**
   * Signs and broadcasts a submission, resolving once it is signed and recorded (before it is mined): the job id
   * is the session's next (docs/protocol.md, Job ids), named in the transaction, so it is known now and a
   * submission another one overtook in the session reverts. Submissions share a transaction and a blob
   * (`batch`, docs/protocol.md, Batches) with the others that arrive while one is being prepared. `landed`
   * says how the send ended for this job: the job mined, a revert, or, for a send that failed in an unknown
   * way (after its broadcast, perhaps) and whose prompt is not found on chain, a
   * `SubmissionOutcomeUnknownError` naming it, which may still land. A submission that would revert is
   * refused here, alone, before anything is signed; so is one whose `beforeSigning` fails.
   */
  submitJobFor(
    payer: string,
    sessionId: bigint,
    maxFee: bigint,
    promptWire: Uint8Array,
    beforeSigning?: BeforeSigning,
  ): Promise<SignedSubmission> {
    return this.#submissions.add({ payer, sessionId, maxFee, promptWire, beforeSigning });
  }

  /**
   * One batch: the blob of every prompt (its KZG commitment on a KZG thread, while the job ids are read),
   * each submission simulated alone (one that would revert is refused and left out: its payload stays in
   * the blob, unread), each kept job's `beforeSigning` awaited (one that fails is left out too), then
   * `batch(calls)` signed and handed to each job's caller, and broadcast once the blob's proof is ready.
   * Settles once every entry has been told.
   */
  async #submitBatch(entries: BatchEntry<SubmissionRequest, SignedSubmission>[]): Promise<void> {
    const registry = this.reads.jobRegistry;
    const reading = Promise.all(entries.map(({ request }) => registry.nextJobId(request.sessionId)));
    reading.catch(() => undefined);
    const blob = await provingBlobSidecarOf(...entries.map(({ request }) => request.promptWire));
    const jobIds = await reading;
    const calls = entries.map(({ request }, promptIndex) =>
      registry.interface.encodeFunctionData('submitJobFor', [
        request.payer,
        request.sessionId,
        jobIds[promptIndex]!,
        request.maxFee,
        0,
        promptIndex,
      ]),
    );
    const simulated = await Promise.allSettled(calls.map((data) => this.#simulateAlone(data, blob)));
    const passed = entries.flatMap((entry, promptIndex) => {
      const outcome = simulated[promptIndex]!;
      if (outcome.status === 'fulfilled') return [{ entry, jobId: jobIds[promptIndex]!, promptIndex }];
      this.metrics.transactionSent('submitJobFor', 'refused');
      entry.reject(outcome.reason);
      return [];
    });
    const recorded = await Promise.allSettled(
      passed.map(({ entry, jobId }) => entry.request.beforeSigning?.(jobId)),
    );
    const kept = passed.filter(({ entry }, index) => {
      const outcome = recorded[index]!;
      if (outcome.status === 'rejected') entry.reject(outcome.reason);
      return outcome.status === 'fulfilled';
    });
    if (kept.length === 0) return;

    let announce!: (attempt: SignedTransaction) => void;
    const signed = new Promise<SignedTransaction>((resolve) => (announce = resolve));
    const data = registry.interface.encodeFunctionData('batch', [
      kept.map(({ promptIndex }) => calls[promptIndex]!),
    ]);
    const mined = this.sender.send({ to: this.jobRegistry, data, blobs: [blob], onSigned: announce });
    kept.forEach(({ entry, jobId, promptIndex }, call) => {
      const { payer, sessionId } = entry.request;
      const landed = mined.then(
        (sent) => {
          const outcome = this.#jobOf(sent, jobId, call);
          this.metrics.transactionSent('submitJobFor', outcome instanceof Error ? 'failed' : 'mined');
          if (outcome instanceof Error) throw outcome;
          return outcome;
        },
        async (error: unknown) => {
          const nothingLanded =
            error instanceof ContractRevertError ||
            error instanceof BlobFeeTooHighError ||
            error instanceof TransactionRevertedError;
          this.metrics.transactionSent(
            'submitJobFor',
            error instanceof ContractRevertError ? 'refused' : 'failed',
          );
          if (nothingLanded) throw error;
          const found = await this.#landedSubmission(payer, sessionId, blob.versionedHash, promptIndex).catch(
            () => undefined,
          );
          if (found) return found;
          throw new SubmissionOutcomeUnknownError(sessionId, blob.versionedHash, promptIndex, error);
        },
      );
      landed.catch(() => undefined); // the caller awaits it; a batch refused before signing rejects it here
      void signed.then(({ hash, signedTransaction }) =>
        entry.resolve({ jobId, hash, signedTransaction, blob, promptIndex, landed }),
      );
      // A refusal before the signing (the batch's simulation, the blob fee) fails the call itself; a batch
      // seen only mined (its signing never announced) is handed over without the signed transaction.
      void landed.then(
        (done) => entry.resolve({ jobId: done.jobId, hash: done.tx.hash, blob, promptIndex, landed }),
        (error: unknown) => entry.reject(error),
      );
    });
    await Promise.race([signed, mined]).catch(() => undefined);
  }

  /** A submission's call as if sent alone by the principal, with the batch's blob: its revert, decoded. */
  async #simulateAlone(data: string, blob: ProvingBlobSidecar): Promise<void> {
    await withDecodedRevert(() =>
      this.provider.call({
        from: this.principal,
        to: this.jobRegistry,
        data,
        type: 3,
        blobVersionedHashes: [blob.versionedHash],
        maxFeePerBlobGas: 1n,
      }),
    );
  }

  /** How the batch went for `jobId`, its call number `call`: the job submitted, or why its call reverted. */
  #jobOf(
    sent: Awaited<ReturnType<TransactionSender['send']>>,
    jobId: bigint,
    call: number,
  ): { jobId: bigint; fee: bigint; tx: ServiceTransaction } | TransactionRevertedError {
    const { receipt } = sent;
    const all = this.#eventsOf(receipt);
    const events = all.filter((event) => 'jobId' in event.args && event.args.jobId === jobId);
    const submitted = events.find((event) => event.name === 'JobSubmitted');
    if (submitted?.name === 'JobSubmitted') {
      return {
        jobId,
        fee: submitted.args.fee,
        tx: { hash: receipt.hash, blockNumber: receipt.blockNumber, events },
      };
    }
    const failed = all.find((event) => event.name === 'BatchCallFailed' && event.args.index === BigInt(call));
    const reason = failed?.name === 'BatchCallFailed' ? decodeRevertData(failed.args.reason) : undefined;
    return new TransactionRevertedError(
      sent.account,
      sent.nonce,
      receipt.hash,
      receipt.blockNumber,
      reason ?? null,
    );
  }

  /** The job a submission of this prompt into this session landed as, if it is on chain (recent blocks). */
  async #landedSubmission(payer: string, sessionId: bigint, promptBlobHash: string, promptIndex: number) {
    const registry = this.reads.jobRegistry;
    const latest = await this.provider.getBlockNumber();
    const logs = await registry.queryFilter(
      registry.filters.JobSubmitted(undefined, payer),
      Math.max(0, latest - LANDED_LOOKBACK_BLOCKS),
    );
    const log = logs.find(
      (candidate) =>
        candidate.args.sessionId === sessionId &&
        candidate.args.promptBlobHash.toLowerCase() === promptBlobHash.toLowerCase() &&
        Number(candidate.args.promptIndex) === promptIndex,
    );
    if (!log) return undefined;
    const receipt = await this.provider.getTransactionReceipt(log.transactionHash);
    if (!receipt) return undefined;
    const events = this.#eventsOf(receipt).filter(
      (event) => 'jobId' in event.args && event.args.jobId === log.args.jobId,
    );
    const tx = { hash: receipt.hash, blockNumber: receipt.blockNumber, events };
    return { jobId: log.args.jobId, fee: log.args.fee, tx };
  }

  async reassignJob(jobId: bigint, sessionId: bigint, promptWire: Uint8Array): Promise<ServiceTransaction> {
    const tx = await this.#send(
      'reassignJob',
      [jobId, sessionId, 0, 0],
      [await provingBlobSidecarOf(promptWire)],
    );
    only(tx, 'JobReassigned');
    return tx;
  }

  timeoutJob(jobId: bigint): Promise<ServiceTransaction> {
    return this.#send('timeoutJob', [jobId]);
  }

  refundJob(jobId: bigint): Promise<ServiceTransaction> {
    return this.#send('refundJob', [jobId]);
  }

  /** Refunds a Completed job whose committed answer never reached its caller (within the dispute window). */
  refundUndelivered(jobId: bigint): Promise<ServiceTransaction> {
    return this.#send('refundUndelivered', [jobId]);
  }

  releaseJobs(jobIds: readonly bigint[]): Promise<ServiceTransaction> {
    return this.#send('releaseJobs', [[...jobIds]]);
  }

  /** Disputes `job`'s `commitment` with the worker's signed final: the commit batch is read to prove it. */
  async disputeMismatch(
    job: Job,
    commitment: Commitment,
    ciphertext: Uint8Array,
    signature: Uint8Array,
  ): Promise<ServiceTransaction> {
    const commitBatch = await this.reads.commitBatchOf(job, commitment);
    return this.#send('disputeMismatch', [job.jobId, job.attempt, ciphertext, signature, commitBatch]);
  }

  /**
   * The chain's clock as the next transaction will see it (`chainTimeNow`), from a latest block read at
   * most once a second: every running job's relay asks each poll interval, and one read serves them all.
   */
  now(): Promise<number> {
    return this.#chainTime.now();
  }

  async #send(
    method: string,
    args: readonly unknown[],
    blobs?: readonly ProvingBlobSidecar[],
    onSigned?: (attempt: SignedTransaction) => void,
  ): Promise<ServiceTransaction> {
    const data = (this.reads.jobRegistry.interface as Interface).encodeFunctionData(method, args);
    let mined: Awaited<ReturnType<TransactionSender['send']>>;
    try {
      mined = await this.sender.send({
        to: this.jobRegistry,
        data,
        ...(blobs ? { blobs } : {}),
        ...(onSigned ? { onSigned } : {}),
      });
    } catch (error) {
      const unsent = error instanceof ContractRevertError || error instanceof BlobFeeTooHighError;
      this.metrics.transactionSent(method, unsent ? 'refused' : 'failed');
      throw error;
    }
    this.metrics.transactionSent(method, 'mined');
    return {
      hash: mined.receipt.hash,
      blockNumber: mined.receipt.blockNumber,
      events: this.#eventsOf(mined.receipt),
    };
  }

  #eventsOf(receipt: TransactionReceipt): ProtocolEvent[] {
    return receipt.logs
      .map((log) => decodeProtocolLog(log, this.reads.addresses))
      .filter((event): event is ProtocolEvent => event !== undefined);
  }
}

function only<N extends ProtocolEventName>(tx: ServiceTransaction, name: N): ProtocolEventOf<N> {
  const event = tx.events.find((candidate) => candidate.name === name);
  if (!event) throw new Error(`transaction ${tx.hash} emitted no ${name}`);
  return event as ProtocolEventOf<N>;
}

/** The prompt blob's versioned hash, from a submission's or reassignment's event. */
export function promptBlobHashOf(tx: ServiceTransaction): string | undefined {
  const event = tx.events.find(
    (candidate) => candidate.name === 'JobSubmitted' || candidate.name === 'JobReassigned',
  );
  return event && 'promptBlobHash' in event.args ? String(event.args.promptBlobHash) : undefined;
}

/** The contract error of a refused write, if that is what `error` is. */
export function revertOf(error: unknown): ContractError | undefined {
  return error instanceof ContractRevertError ? error.revert : undefined;
}

/**
 * The API error a refused delegate-path write stands for (docs/protocol.md, the revert table), or
 * undefined when the refusal is not the caller's to fix.
 */
export function delegatePathErrorOf(error: unknown): AppError | undefined {
  if (error instanceof BlobFeeTooHighError) {
    return new AppError('blob_fee_too_high', {
      message: `The blob base fee (${error.requiredFeePerBlobGas} wei) is above this service's maximum (${error.maxFeePerBlobGas} wei); try again later.`,
      retryAfterSeconds: 12,
      cause: error,
    });
  }
  const revert = revertOf(error);
  switch (revert?.name) {
    case 'NotOwnerOrDelegate':
      return new AppError('delegate_not_authorized', { cause: error });
    case 'InsufficientBalance':
      return new AppError('insufficient_balance', { cause: error });
    case 'InsufficientAllowance':
      return new AppError('allowance_exhausted', { cause: error });
    case 'ModelDisabled':
      return new AppError('model_not_found', { cause: error });
    case 'EnforcedPause':
      return new AppError('not_configured', {
        message: 'JobRegistry is paused: no new jobs run.',
        cause: error,
      });
    default:
      return undefined;
  }
}
