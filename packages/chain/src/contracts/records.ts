import { JobState, SessionState, type JobStructOutput, type SessionStructOutput } from '@svc/contracts';

/** A JobRegistry session as the services use it: ids and money as bigint, times as unix seconds. */
export interface Session {
  readonly sessionId: bigint;
  readonly owner: string;
  readonly worker: string;
  readonly modelId: string;
  readonly state: SessionState;
  readonly claimDeadline: number;
  readonly lastActivityAt: number;
  /** 65-byte uncompressed P-256 key (hex) once claimed, `0x` before. */
  readonly publicKey: string;
}

/** A JobRegistry job. `attempt` starts at 1 and grows by one per reassignment. */
export interface Job {
  readonly jobId: bigint;
  readonly sessionId: bigint;
  readonly payer: string;
  readonly worker: string;
  /** The delegate whose allowance paid, or the zero address when the payer sent it. */
  readonly delegate: string;
  readonly state: JobState;
  readonly attempt: number;
  readonly fee: bigint;
  readonly deadline: number;
  readonly completedAt: number;
  readonly failedAt: number;
  readonly allowanceEpoch: number;
  /**
   * The prompt's place among its blob's payloads (until completed); the blob is named by the job's
   * `JobSubmitted` or `JobReassigned` (`ChainClient.promptPlaceOf`).
   */
  readonly promptIndex: number;
  /**
   * Once completed, the commit batch holding the answer and the answer's place in it; the answer's hash
   * is in `JobCompleted` (`ChainClient.commitmentOf`, docs/protocol.md, Commit batches).
   */
  readonly commitBatch: number;
  readonly commitIndex: number;
}

export function toSession(sessionId: bigint, struct: SessionStructOutput): Session {
  return {
    sessionId,
    owner: struct.owner,
    worker: struct.worker,
    modelId: struct.modelId,
    state: enumValue(SessionState, struct.state, 'SessionState'),
    claimDeadline: Number(struct.claimDeadline),
    lastActivityAt: Number(struct.lastActivityAt),
    publicKey: struct.publicKey,
  };
}

export function toJob(jobId: bigint, struct: JobStructOutput): Job {
  return {
    jobId,
    sessionId: struct.sessionId,
    payer: struct.payer,
    worker: struct.worker,
    delegate: struct.delegate,
    state: enumValue(JobState, struct.state, 'JobState'),
    attempt: Number(struct.attempt),
    fee: struct.fee,
    deadline: Number(struct.deadline),
    completedAt: Number(struct.completedAt),
    failedAt: Number(struct.failedAt),
    allowanceEpoch: Number(struct.allowanceEpoch),
    promptIndex: Number(struct.promptIndex),
    commitBatch: Number(struct.commitBatch),
    commitIndex: Number(struct.commitIndex),
  };
}

function enumValue<E extends Record<string, number>>(values: E, raw: bigint, what: string): E[keyof E] {
  const value = Number(raw);
  // A value outside the enum means the ABI and this mirror drifted apart: fail loudly.
  if (!Object.values(values).includes(value)) throw new Error(`unknown ${what} ${raw} returned by the chain`);
  return value as E[keyof E];
}
