import { getBytes } from 'ethers';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { JobErrorReason, type ConnectRequestSchema } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import type { DeltaFrame } from '../jobs/answer-stream.js';
import type { SignedFinalAnswer } from '../jobs/final-answer-journal.js';
import type { JobRefusalReason } from '../jobs/job-refusal.js';

export type LinkRequest = MessageInitShape<typeof ConnectRequestSchema>;

/** Version 2: the challenge is EIP-712 typed data sent as fields (docs/protocol.md, Worker link). */
export const WORKER_LINK_PROTOCOL_VERSION = 2;

export function helloFrame(worker: string, software: string): LinkRequest {
  return {
    frame: {
      case: 'hello',
      value: { worker: { hex: worker }, protocolVersion: WORKER_LINK_PROTOCOL_VERSION, software },
    },
  };
}

export function chunkFrame(delta: DeltaFrame): LinkRequest {
  return {
    frame: {
      case: 'chunk',
      value: {
        jobId: delta.jobId.toString(),
        attempt: delta.attempt,
        seq: delta.seq,
        sealedDelta: delta.frame,
      },
    },
  };
}

export function finalFrame(answer: SignedFinalAnswer): LinkRequest {
  return {
    frame: {
      case: 'finalAnswer',
      value: {
        jobId: answer.jobId.toString(),
        attempt: answer.attempt,
        seq: answer.seq,
        sealedAnswer: answer.frame,
        workerSignature: getBytes(answer.signature),
      },
    },
  };
}

const ERROR_REASONS: Record<JobRefusalReason, JobErrorReason> = {
  deadline_too_close: JobErrorReason.UNAVAILABLE,
  no_free_slot: JobErrorReason.UNAVAILABLE,
  draining: JobErrorReason.UNAVAILABLE,
  no_session_key: JobErrorReason.PROMPT_INVALID,
  malformed_blob: JobErrorReason.PROMPT_INVALID,
  undecryptable_prompt: JobErrorReason.PROMPT_INVALID,
  blob_unavailable: JobErrorReason.BLOB_UNAVAILABLE,
  wrong_model: JobErrorReason.MODEL_MISMATCH,
  model_failed: JobErrorReason.BACKEND_FAILED,
  internal_error: JobErrorReason.UNSPECIFIED,
};

/** Why a job handed over before inclusion was given up (docs/protocol.md, Starting before inclusion). */
const PENDING_ERROR_REASONS: Record<string, JobErrorReason> = {
  not_mined: JobErrorReason.NOT_MINED,
  replaced: JobErrorReason.REPLACED,
};

export function jobErrorFrame(jobId: bigint, attempt: number, reason: string): LinkRequest {
  return {
    frame: {
      case: 'jobError',
      value: {
        jobId: jobId.toString(),
        attempt,
        reason:
          ERROR_REASONS[reason as JobRefusalReason] ??
          PENDING_ERROR_REASONS[reason] ??
          JobErrorReason.UNSPECIFIED,
        detail: reason,
      },
    },
  };
}
