import { join } from 'node:path';
import { getBytes, hexlify } from 'ethers';
import { listFiles, readFileIfExists, removeFile, writeFileDurably } from '../storage/durable-file.js';

/** A signed final answer, saved before it is sent or committed so it is never regenerated. */
export interface SignedFinalAnswer {
  readonly jobId: bigint;
  readonly attempt: number;
  readonly sessionId: bigint;
  /** Number of deltas sent before the final (the final's seq). */
  readonly seq: number;
  /** The encrypted final answer frame (nonce ‖ ciphertext ‖ tag). */
  readonly frame: Uint8Array;
  /** The worker's EIP-712 `FinalAnswer` signature of the frame (docs/protocol.md, Worker signature). */
  readonly signature: string;
  /** What `completeJob` commits: keccak256 of the frame (unless a test fault asked otherwise). */
  readonly commitHash: string;
  /** The job's deadline on chain (unix seconds); for an answer made before inclusion, when to forget it. */
  readonly deadline: number;
  readonly committed: boolean;
  readonly acknowledged: boolean;
  /**
   * For an answer made before its job was mined (a pending job): the prompt blob's versioned hash and the
   * prompt's index in it that it answers. It is committed only for a job on chain with this very prompt,
   * never for a replacement.
   */
  readonly promptBlobHash?: string;
  readonly promptIndex?: number;
  /** Made before inclusion and the job not yet seen on chain. */
  readonly pending?: boolean;
}

interface StoredFinalAnswer {
  v: 1;
  jobId: string;
  attempt: number;
  sessionId: string;
  seq: number;
  frame: string;
  signature: string;
  commitHash: string;
  deadline: number;
  committed: boolean;
  acknowledged: boolean;
  promptBlobHash?: string;
  promptIndex?: number;
  pending?: boolean;
}

const SUFFIX = '.final.json';

/** One file per job attempt; every write is durable (fsync'd) before the caller goes on. */
export class FinalAnswerJournal {
  readonly #directory: string;
  /** Read-modify-write of one file at a time: the runner and the link both update entries. */
  #serial: Promise<unknown> = Promise.resolve();

  constructor(directory: string) {
    this.#directory = directory;
  }

  save(answer: SignedFinalAnswer): Promise<void> {
    return this.#exclusive(() => this.#write(answer));
  }

  async get(jobId: bigint, attempt: number): Promise<SignedFinalAnswer | undefined> {
    const json = await readFileIfExists(this.#pathOf(jobId, attempt));
    return json === undefined ? undefined : fromStored(JSON.parse(json) as StoredFinalAnswer);
  }

  /**
   * Records a step of the answer's life; the entry goes once it is both committed on chain and
   * acknowledged by the orchestrator as committed (or committed, when `forgetOnCommit`: no link).
   */
  update(
    jobId: bigint,
    attempt: number,
    change: Partial<Pick<SignedFinalAnswer, 'committed' | 'acknowledged'>>,
    forgetOnCommit = false,
  ): Promise<SignedFinalAnswer | undefined> {
    return this.#exclusive(async () => {
      const current = await this.get(jobId, attempt);
      if (!current) return undefined;
      const next = { ...current, ...change };
      if (next.committed && (next.acknowledged || forgetOnCommit))
        await removeFile(this.#pathOf(jobId, attempt));
      else await this.#write(next);
      return next;
    });
  }

  remove(jobId: bigint, attempt: number): Promise<void> {
    return this.#exclusive(() => removeFile(this.#pathOf(jobId, attempt)));
  }

  /** Every answer still held, oldest job first: what a restart re-sends and re-commits. */
  async all(): Promise<SignedFinalAnswer[]> {
    const names = await listFiles(this.#directory, SUFFIX);
    const answers: SignedFinalAnswer[] = [];
    for (const name of names) {
      const json = await readFileIfExists(join(this.#directory, name));
      if (json !== undefined) answers.push(fromStored(JSON.parse(json) as StoredFinalAnswer));
    }
    return answers.sort((a, b) => (a.jobId === b.jobId ? a.attempt - b.attempt : a.jobId < b.jobId ? -1 : 1));
  }

  #write(answer: SignedFinalAnswer): Promise<void> {
    return writeFileDurably(this.#pathOf(answer.jobId, answer.attempt), JSON.stringify(toStored(answer)));
  }

  #exclusive<T>(work: () => Promise<T>): Promise<T> {
    const result = this.#serial.then(work, work);
    this.#serial = result.catch(() => undefined);
    return result;
  }

  #pathOf(jobId: bigint, attempt: number): string {
    return join(this.#directory, `${jobId}-${attempt}${SUFFIX}`);
  }
}

function toStored(answer: SignedFinalAnswer): StoredFinalAnswer {
  return {
    v: 1,
    jobId: answer.jobId.toString(),
    attempt: answer.attempt,
    sessionId: answer.sessionId.toString(),
    seq: answer.seq,
    frame: hexlify(answer.frame),
    signature: answer.signature,
    commitHash: answer.commitHash,
    deadline: answer.deadline,
    committed: answer.committed,
    acknowledged: answer.acknowledged,
    ...(answer.promptBlobHash !== undefined ? { promptBlobHash: answer.promptBlobHash } : {}),
    ...(answer.promptIndex !== undefined ? { promptIndex: answer.promptIndex } : {}),
    ...(answer.pending ? { pending: true } : {}),
  };
}

function fromStored(stored: StoredFinalAnswer): SignedFinalAnswer {
  return {
    jobId: BigInt(stored.jobId),
    attempt: stored.attempt,
    sessionId: BigInt(stored.sessionId),
    seq: stored.seq,
    frame: getBytes(stored.frame),
    signature: stored.signature,
    commitHash: stored.commitHash,
    deadline: stored.deadline,
    committed: stored.committed,
    acknowledged: stored.acknowledged,
    ...(stored.promptBlobHash !== undefined ? { promptBlobHash: stored.promptBlobHash } : {}),
    ...(stored.promptIndex !== undefined ? { promptIndex: stored.promptIndex } : {}),
    ...(stored.pending ? { pending: true } : {}),
  };
}
