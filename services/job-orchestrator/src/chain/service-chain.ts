import type { Interface, Provider, TransactionReceipt } from 'ethers';
import {
  BlobFeeTooHighError,
  ContractRevertError,
  TransactionRevertedError,
  provingBlobSidecarOf,
  chainTimeNow,
  decodeProtocolLog,
  type ProvingBlobSidecar,
  type SignedTransaction,
  type ChainClient,
  type ContractError,
  type ProtocolEvent,
  type ProtocolEventName,
  type ProtocolEventOf,
  type TransactionSender,
} from '@svc/chain';
import { AppError } from '@svc/platform';
import type { JobOrchestratorMetrics } from '../observability/job-orchestrator-metrics.js';

/** How far back a submission whose send failed is looked for (about 3.4 hours of 12 s blocks). */
const LANDED_LOOKBACK_BLOCKS = 1_024;

/**
 * A submission that may have been broadcast and was not found on chain: it may still land. `promptBlobHash`
 * names it: the job it becomes carries that blob.
 */
export class SubmissionOutcomeUnknownError extends Error {
  constructor(
    readonly sessionId: bigint,
    readonly promptBlobHash: string,
    cause: unknown,
  ) {
    super(`the submission of blob ${promptBlobHash} in session ${sessionId} has no known outcome`, { cause });
    this.name = 'SubmissionOutcomeUnknownError';
  }
}

/** A submission signed and being broadcast, not yet mined (`signedTransaction` absent when only seen mined). */
export interface SignedSubmission {
  readonly jobId: bigint;
  readonly hash: string;
  /** The signed transaction without its sidecar, for the worker to check before inclusion. */
  readonly signedTransaction?: string;
  readonly blob: ProvingBlobSidecar;
  readonly landed: Promise<{ jobId: bigint; fee: bigint; tx: ServiceTransaction }>;
}

/** A transaction the service sent, mined, with the protocol events it emitted. */
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
  constructor(
    readonly reads: ChainClient,
    private readonly sender: TransactionSender,
    /** The service's principal: the delegate wallets authorize and the owner of per-call sessions. */
    readonly principal: string,
    private readonly metrics: JobOrchestratorMetrics,
  ) {}

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
   * submission another one overtook in the session reverts. `landed` says how the send ended: the job
   * mined, a revert, or, for a send that failed in an unknown way (after its broadcast, perhaps) and whose
   * blob is not found on chain, a `SubmissionOutcomeUnknownError` naming the blob, which may still land.
   * The prompt blob is built here (KZG commitment and proof), so its cost shows up in the submission.
   */
  async submitJobFor(
    payer: string,
    sessionId: bigint,
    maxFee: bigint,
    promptWire: Uint8Array,
  ): Promise<SignedSubmission> {
    // The read overlaps the blob's KZG commitment (on a KZG thread); the proof goes on computing there
    // while the transaction is simulated, signed and handed to the worker, and only the broadcast waits for it.
    const nextJobId = this.reads.jobRegistry.nextJobId(sessionId);
    nextJobId.catch(() => undefined);
    const blob = await provingBlobSidecarOf(promptWire);
    const jobId = await nextJobId;
    let announce!: (attempt: SignedTransaction) => void;
    const signed = new Promise<SignedTransaction>((resolve) => (announce = resolve));
    const landed = this.#send('submitJobFor', [payer, sessionId, jobId, maxFee], [blob], announce).then(
      (tx) => {
        const submitted = only(tx, 'JobSubmitted');
        return { jobId: submitted.args.jobId, fee: submitted.args.fee, tx };
      },
      async (error: unknown) => {
        const nothingLanded =
          error instanceof ContractRevertError ||
          error instanceof BlobFeeTooHighError ||
          error instanceof TransactionRevertedError;
        if (nothingLanded) throw error;
        const found = await this.#landedSubmission(payer, sessionId, blob.versionedHash).catch(
          () => undefined,
        );
        if (found) return found;
        throw new SubmissionOutcomeUnknownError(sessionId, blob.versionedHash, error);
      },
    );
    // A refusal before the signing (a simulation's revert, the blob fee) rejects this call itself.
    const first = await Promise.race([
      signed.then((attempt) => ({ attempt })),
      landed.then((mined) => ({ mined })),
    ]);
    if ('mined' in first) return { jobId: first.mined.jobId, hash: first.mined.tx.hash, blob, landed };
    const { hash, signedTransaction } = first.attempt;
    return { jobId, hash, signedTransaction, blob, landed };
  }

  /** The job a submission of this blob into this session landed as, if it is on chain (recent blocks). */
  async #landedSubmission(payer: string, sessionId: bigint, promptBlobHash: string) {
    const registry = this.reads.jobRegistry;
    const latest = await this.provider.getBlockNumber();
    const logs = await registry.queryFilter(
      registry.filters.JobSubmitted(undefined, payer),
      Math.max(0, latest - LANDED_LOOKBACK_BLOCKS),
    );
    const log = logs.find(
      (candidate) =>
        candidate.args.sessionId === sessionId &&
        candidate.args.promptBlobHash.toLowerCase() === promptBlobHash.toLowerCase(),
    );
    if (!log) return undefined;
    const receipt = await this.provider.getTransactionReceipt(log.transactionHash);
    if (!receipt) return undefined;
    const tx = { hash: receipt.hash, blockNumber: receipt.blockNumber, events: this.#eventsOf(receipt) };
    return { jobId: log.args.jobId, fee: log.args.fee, tx };
  }

  async reassignJob(jobId: bigint, sessionId: bigint, promptWire: Uint8Array): Promise<ServiceTransaction> {
    const tx = await this.#send('reassignJob', [jobId, sessionId], [await provingBlobSidecarOf(promptWire)]);
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

  disputeMismatch(
    jobId: bigint,
    attempt: number,
    ciphertext: Uint8Array,
    signature: Uint8Array,
  ): Promise<ServiceTransaction> {
    return this.#send('disputeMismatch', [jobId, attempt, ciphertext, signature]);
  }

  /** The chain's clock as the next transaction will see it (`chainTimeNow`). */
  now(): Promise<number> {
    return chainTimeNow(this.reads.provider);
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
