import { SessionState, versionedHash, type Session } from '@svc/chain';
import { jobRegistryInterface } from '@svc/contracts';
import { Transaction } from 'ethers';

/** A submission handed over the link at broadcast (`PendingJob`), before it is mined. */
export interface PendingJobOffer {
  readonly jobId: bigint;
  readonly sessionId: bigint;
  readonly attempt: number;
  readonly rawTransaction: Uint8Array;
  /** The blob the submission names (one of the transaction's), holding the prompt among its payloads. */
  readonly blob: Uint8Array;
  /** Recomputed from the blob here: no proof comes with it (the service may still be computing it). */
  readonly commitment: Uint8Array;
}

export type PendingJobRejection =
  | 'malformed_transaction'
  | 'wrong_chain'
  | 'wrong_contract'
  | 'not_a_submission'
  | 'wrong_session'
  | 'wrong_job_id'
  | 'wrong_attempt'
  | 'session_not_ours'
  | 'wrong_sender'
  | 'blob_mismatch'
  | 'bound_reached';

export class PendingJobRejectedError extends Error {
  override readonly name = 'PendingJobRejectedError';

  constructor(
    readonly reason: PendingJobRejection,
    message: string,
  ) {
    super(message);
  }
}

/** What the worker reads from the chain's current state to check a pending submission. */
export interface PendingJobChainView {
  readonly chainId: bigint;
  readonly jobRegistry: string;
  /** This worker's address. */
  readonly worker: string;
  getSession(sessionId: bigint): Promise<Session>;
  principalOf(account: string): Promise<string>;
  isDelegateAuthorized(user: string, delegate: string): Promise<boolean>;
  /** Whether the blob is the one the commitment commits to (KZG, off the event loop). */
  commitsTo(blob: Uint8Array, commitment: Uint8Array): Promise<boolean>;
}

/** A pending submission that passed every check possible without its block. */
export interface CheckedPendingJob {
  readonly jobId: bigint;
  readonly sessionId: bigint;
  readonly session: Session;
  /** The transaction's hash: a replacement (same nonce, another blob) has another one. */
  readonly txHash: string;
  readonly sender: string;
  readonly nonce: number;
  /** The prompt blob's versioned hash and the prompt's place in it: the job on chain must record these. */
  readonly promptBlobHash: string;
  readonly promptIndex: number;
}

const SUBMIT_JOB_FOR = jobRegistryInterface.getFunction('submitJobFor')!;
const SUBMIT_JOB_WITH_DEBIT = jobRegistryInterface.getFunction('submitJobWithDebit')!;
const BATCH = jobRegistryInterface.getFunction('batch')!;

/** One submission call: its session, job id, payer (`submitJobFor` only) and where its prompt lies. */
interface SubmissionCall {
  readonly sessionId: bigint;
  readonly jobId: bigint;
  readonly payer?: string;
  readonly blobIndex: number;
  readonly promptIndex: number;
}

/** The submission a call makes, or undefined when the call is not a submission (or does not decode). */
function submissionOf(data: string): SubmissionCall | undefined {
  const selector = data.slice(0, 10).toLowerCase();
  try {
    if (selector === SUBMIT_JOB_FOR.selector) {
      const args = jobRegistryInterface.decodeFunctionData(SUBMIT_JOB_FOR, data);
      return {
        payer: String(args[0]),
        sessionId: BigInt(args[1] as bigint),
        jobId: BigInt(args[2] as bigint),
        blobIndex: Number(args[4]),
        promptIndex: Number(args[5]),
      };
    }
    if (selector === SUBMIT_JOB_WITH_DEBIT.selector) {
      const args = jobRegistryInterface.decodeFunctionData(SUBMIT_JOB_WITH_DEBIT, data);
      return {
        sessionId: BigInt(args[0] as bigint),
        jobId: BigInt(args[1] as bigint),
        blobIndex: Number(args[4]),
        promptIndex: Number(args[5]),
      };
    }
  } catch {
    return undefined;
  }
  return undefined;
}

/**
 * The submission of `jobId` in a transaction's calldata: the call itself, or the one call of a `batch`
 * that names the job (docs/protocol.md, Batches). Several calls naming it are refused: only one can land.
 */
function submissionNaming(data: string, jobId: bigint): SubmissionCall {
  if (data.slice(0, 10).toLowerCase() !== BATCH.selector) {
    const call = submissionOf(data);
    if (!call)
      throw new PendingJobRejectedError('not_a_submission', 'the transaction is not a job submission');
    return call;
  }
  let calls: string[];
  try {
    calls = (jobRegistryInterface.decodeFunctionData(BATCH, data)[0] as string[]).map(String);
  } catch {
    throw new PendingJobRejectedError('not_a_submission', 'the batch calldata does not decode');
  }
  const naming = calls.map(submissionOf).filter((call) => call?.jobId === jobId);
  if (naming.length !== 1) {
    throw new PendingJobRejectedError('wrong_job_id', 'the batch does not submit this job exactly once');
  }
  return naming[0]!;
}

/**
 * Checks a pending submission without its block (docs/protocol.md, Starting before inclusion): the
 * signed transaction is a type-3 call on this chain's JobRegistry, `submitJobFor` or `submitJobWithDebit`
 * (alone or as the one call of a `batch` naming the job) naming the offered session and job id; the session
 * is an active one of this worker; its sender may submit into it as JobRegistry decides ({@link maySubmit});
 * the blob the submission names has the versioned hash of the sidecar's commitment; and that commitment is
 * the blob's (recomputed here, off the event loop). The prompt itself (the payload the submission names) is
 * opened by the caller ({@link PromptReader.open}). Everything failing is a
 * {@link PendingJobRejectedError}, never a crash.
 */
export async function checkPendingJob(
  offer: PendingJobOffer,
  view: PendingJobChainView,
): Promise<CheckedPendingJob> {
  let tx: Transaction;
  try {
    tx = Transaction.from(`0x${Buffer.from(offer.rawTransaction).toString('hex')}`);
  } catch {
    throw new PendingJobRejectedError('malformed_transaction', 'the raw transaction does not parse');
  }
  if (tx.type !== 3 || !tx.signature || !tx.from) {
    throw new PendingJobRejectedError('malformed_transaction', 'not a signed blob (type 3) transaction');
  }
  if (tx.chainId !== view.chainId) {
    throw new PendingJobRejectedError('wrong_chain', `the transaction is for chain ${tx.chainId}`);
  }
  if (!tx.to || tx.to.toLowerCase() !== view.jobRegistry.toLowerCase()) {
    throw new PendingJobRejectedError('wrong_contract', 'the transaction does not call JobRegistry');
  }
  const { sessionId, jobId, payer, blobIndex, promptIndex } = submissionNaming(tx.data, offer.jobId);
  if (sessionId !== offer.sessionId) {
    throw new PendingJobRejectedError('wrong_session', 'the transaction names another session');
  }
  if (jobId !== offer.jobId || jobId >> 32n !== sessionId || (jobId & 0xffffffffn) === 0n) {
    throw new PendingJobRejectedError('wrong_job_id', 'the job id is not one of the session');
  }
  // A reassignment is announced by the chain only; a pending submission is always attempt 1.
  if (offer.attempt !== 1) {
    throw new PendingJobRejectedError('wrong_attempt', 'a pending submission is always attempt 1');
  }
  // The chain reads go out first, so their round trips overlap the KZG commitment (its thread) below.
  const reads = Promise.all([view.getSession(sessionId), view.principalOf(tx.from)]);
  reads.catch(() => undefined); // awaited below, unless a blob check refuses first
  const hashes = tx.blobVersionedHashes ?? [];
  let promptBlobHash: string;
  try {
    promptBlobHash = versionedHash(offer.commitment);
  } catch {
    throw new PendingJobRejectedError('blob_mismatch', 'the KZG commitment is not 48 bytes');
  }
  if (hashes[blobIndex]?.toLowerCase() !== promptBlobHash) {
    throw new PendingJobRejectedError('blob_mismatch', 'the commitment is not the blob the submission names');
  }
  if (!(await view.commitsTo(offer.blob, offer.commitment))) {
    throw new PendingJobRejectedError('blob_mismatch', 'the blob is not the one the commitment commits to');
  }
  const [session, senderPrincipal] = await reads;
  if (session.state !== SessionState.Active || session.worker.toLowerCase() !== view.worker.toLowerCase()) {
    throw new PendingJobRejectedError('session_not_ours', 'the session is not this worker’s');
  }
  // As JobRegistry decides it, so a submission that would revert when mined is never answered.
  if (!(await maySubmit(view, session.owner, senderPrincipal, payer))) {
    throw new PendingJobRejectedError('wrong_sender', 'the sender may not submit in this session');
  }
  return {
    jobId,
    sessionId,
    session,
    txHash: tx.hash!,
    sender: tx.from,
    nonce: tx.nonce,
    promptBlobHash,
    promptIndex,
  };
}

/**
 * Who JobRegistry lets submit into a session owned by `owner`. `submitJobFor` (a `payer`): the session is
 * the payer's or the sender's, and the sender is the payer or an authorized delegate of it.
 * `submitJobWithDebit`: the sender is the owner or an authorized delegate of it (the facilitator). So a
 * payer cannot take, with its own submission, the job id of one the service handed over before inclusion.
 * A delegate revoked within its grace still lands on chain but is declined here: the job then comes from
 * the chain.
 */
async function maySubmit(
  view: PendingJobChainView,
  owner: string,
  senderPrincipal: string,
  payer: string | undefined,
): Promise<boolean> {
  const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
  if (payer === undefined) {
    return same(senderPrincipal, owner) || (await view.isDelegateAuthorized(owner, senderPrincipal));
  }
  if (!same(owner, payer) && !same(owner, senderPrincipal)) return false;
  return same(senderPrincipal, payer) || (await view.isDelegateAuthorized(payer, senderPrincipal));
}

/**
 * Bounds the work a worker does on submissions not yet mined: at most `perSession` (1) unconfirmed jobs
 * per session and `perLink` in all, so an orchestrator whose submissions never land wastes at most that
 * much generation at a time.
 */
export class UnconfirmedWork {
  readonly #perSession: number;
  readonly #perLink: number;
  readonly #jobs = new Map<bigint, bigint>();

  constructor(bounds: { perSession?: number; perLink: number }) {
    this.#perSession = bounds.perSession ?? 1;
    this.#perLink = bounds.perLink;
  }

  get size(): number {
    return this.#jobs.size;
  }

  has(jobId: bigint): boolean {
    return this.#jobs.has(jobId);
  }

  /** Takes a slot for `jobId` in `sessionId`, or refuses with `bound_reached`. */
  take(jobId: bigint, sessionId: bigint): void {
    if (this.#jobs.has(jobId)) throw new PendingJobRejectedError('bound_reached', 'already pending');
    if (this.#jobs.size >= this.#perLink) {
      throw new PendingJobRejectedError('bound_reached', 'too many unconfirmed jobs on this link');
    }
    let inSession = 0;
    for (const session of this.#jobs.values()) if (session === sessionId) inSession += 1;
    if (inSession >= this.#perSession) {
      throw new PendingJobRejectedError('bound_reached', 'the session already has an unconfirmed job');
    }
    this.#jobs.set(jobId, sessionId);
  }

  /** The unconfirmed job held in `sessionId`, if any. */
  inSession(sessionId: bigint): bigint | undefined {
    for (const [jobId, session] of this.#jobs) if (session === sessionId) return jobId;
    return undefined;
  }

  /** Gives the slot back: the job was mined, or given up. */
  release(jobId: bigint): void {
    this.#jobs.delete(jobId);
  }
}
