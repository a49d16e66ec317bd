import { keccak256 } from 'ethers';
import { EnvelopeDecryptionError } from '../errors.js';
import { GCM_NONCE_BYTES, GCM_TAG_BYTES, gcmOpen, gcmSeal, nonceOrRandom, requireAesKey } from './aes-gcm.js';
import { asBuffer, uint256be, uint32be } from './bytes.js';

/**
 * Answer frames (docs/protocol.md, Encryption): each delta and the final answer is UTF-8 text sealed with
 * AES-256-GCM under the prompt's replyKey and a fresh random nonce.
 *   frame wire = nonce (12) ‖ ciphertext ‖ tag (16)
 *   AAD        = kind (1 byte: 1 delta, 2 final) ‖ uint256be(jobId) ‖ uint32be(attempt) ‖ uint32be(seq)
 * Deltas count seq from 1; the final uses seq = the number of deltas sent before it. The AAD keeps a
 * frame from being replayed into another job, attempt, position, or from a delta into a final.
 */
export const AnswerFrameKind = { Delta: 1, Final: 2 } as const;
export type AnswerFrameKind = (typeof AnswerFrameKind)[keyof typeof AnswerFrameKind];

/** Bytes a frame adds around its plaintext (nonce and tag). */
export const ANSWER_FRAME_OVERHEAD_BYTES = GCM_NONCE_BYTES + GCM_TAG_BYTES;

/** Where a frame belongs: `attempt` is the job's attempt on chain (1, plus 1 per reassignment). */
export interface AnswerFramePosition {
  readonly jobId: bigint;
  readonly attempt: number;
  readonly seq: number;
}

export function answerFrameAad(kind: AnswerFrameKind, position: AnswerFramePosition): Buffer {
  if (kind !== AnswerFrameKind.Delta && kind !== AnswerFrameKind.Final) {
    throw new RangeError(`unknown answer frame kind ${String(kind)}`);
  }
  return Buffer.concat([
    Buffer.of(kind),
    uint256be(position.jobId, 'jobId'),
    uint32be(position.attempt, 'attempt'),
    uint32be(position.seq, 'seq'),
  ]);
}

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function encryptAnswerFrame(
  kind: AnswerFrameKind,
  text: string,
  replyKey: Uint8Array,
  position: AnswerFramePosition,
  randomness: { readonly nonce?: Uint8Array } = {},
): Uint8Array {
  requireAesKey(replyKey, 'replyKey');
  const aad = answerFrameAad(kind, position);
  const nonce = nonceOrRandom(randomness.nonce);
  const sealed = gcmSeal(replyKey, nonce, aad, utf8Encoder.encode(text));
  const frame = new Uint8Array(GCM_NONCE_BYTES + sealed.length);
  frame.set(nonce, 0);
  frame.set(sealed, GCM_NONCE_BYTES);
  return frame;
}

/** Opens a frame; every failure (short frame, tampering, wrong position or kind) is an {@link EnvelopeDecryptionError}. */
export function decryptAnswerFrame(
  kind: AnswerFrameKind,
  frame: Uint8Array,
  replyKey: Uint8Array,
  position: AnswerFramePosition,
): string {
  requireAesKey(replyKey, 'replyKey');
  if (frame.length < ANSWER_FRAME_OVERHEAD_BYTES) {
    throw new EnvelopeDecryptionError(
      'truncated',
      `an answer frame is at least ${ANSWER_FRAME_OVERHEAD_BYTES} bytes, got ${frame.length}`,
    );
  }
  const bytes = asBuffer(frame);
  const plaintext = gcmOpen(
    replyKey,
    bytes.subarray(0, GCM_NONCE_BYTES),
    answerFrameAad(kind, position),
    bytes.subarray(GCM_NONCE_BYTES),
  );
  try {
    return utf8Decoder.decode(plaintext);
  } catch (error) {
    throw new EnvelopeDecryptionError('invalid_utf8', 'the answer frame is not UTF-8 text', { cause: error });
  }
}

/**
 * The `responseHash` a worker commits with `completeJob`: keccak256 over the whole final frame wire
 * (nonce ‖ ciphertext ‖ tag), the same bytes `disputeMismatch` takes as `ciphertext`.
 */
export function responseHashOf(finalFrame: Uint8Array): string {
  return keccak256(finalFrame);
}
