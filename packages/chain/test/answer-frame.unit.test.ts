import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { keccak256 } from 'ethers';
import {
  ANSWER_FRAME_OVERHEAD_BYTES,
  AnswerFrameKind,
  EnvelopeDecryptionError,
  answerFrameAad,
  decryptAnswerFrame,
  encryptAnswerFrame,
  generateReplyKey,
  responseHashOf,
  type AnswerFramePosition,
} from '../src/index.js';
import { gcmSeal } from '../src/envelope/aes-gcm.js';

const replyKey = generateReplyKey();
const position: AnswerFramePosition = { jobId: 900n, attempt: 1, seq: 3 };

function decryptionFailure(open: () => unknown): EnvelopeDecryptionError {
  try {
    open();
  } catch (error) {
    if (error instanceof EnvelopeDecryptionError) return error;
    throw error;
  }
  throw new Error('the frame opened');
}

function flipped(frame: Uint8Array, offset: number): Uint8Array {
  const copy = new Uint8Array(frame);
  copy[offset]! ^= 0x01;
  return copy;
}

describe('answer frames', () => {
  it('round-trips deltas and finals as nonce ‖ ciphertext ‖ tag', () => {
    const text = 'Hello, wörld 🌍';
    for (const kind of [AnswerFrameKind.Delta, AnswerFrameKind.Final]) {
      const frame = encryptAnswerFrame(kind, text, replyKey, position);
      expect(frame.length).toBe(Buffer.byteLength(text) + ANSWER_FRAME_OVERHEAD_BYTES);
      expect(decryptAnswerFrame(kind, frame, replyKey, position)).toBe(text);
    }
    expect(
      decryptAnswerFrame(
        AnswerFrameKind.Final,
        encryptAnswerFrame(2, '', replyKey, position),
        replyKey,
        position,
      ),
    ).toBe('');
  });

  it('uses a fresh nonce per frame', () => {
    const a = encryptAnswerFrame(AnswerFrameKind.Delta, 'same', replyKey, position);
    const b = encryptAnswerFrame(AnswerFrameKind.Delta, 'same', replyKey, position);
    expect(a.subarray(0, 12)).not.toEqual(b.subarray(0, 12));
  });

  it('lays the AAD out as kind ‖ uint256be(jobId) ‖ uint32be(attempt) ‖ uint32be(seq)', () => {
    const aad = answerFrameAad(AnswerFrameKind.Final, {
      jobId: (1n << 255n) + 5n,
      attempt: 2,
      seq: 0x01020304,
    });
    expect(aad.toString('hex')).toBe(`02${'80'}${'00'.repeat(30)}05` + '00000002' + '01020304');
  });

  describe('tampering', () => {
    const delta = encryptAnswerFrame(AnswerFrameKind.Delta, 'a delta', replyKey, position);
    const cases: Array<[string, () => unknown, EnvelopeDecryptionError['reason']]> = [
      [
        'a ciphertext byte',
        () => decryptAnswerFrame(1, flipped(delta, 12), replyKey, position),
        'authentication_failed',
      ],
      [
        'a tag byte',
        () => decryptAnswerFrame(1, flipped(delta, delta.length - 1), replyKey, position),
        'authentication_failed',
      ],
      [
        'a nonce byte',
        () => decryptAnswerFrame(1, flipped(delta, 0), replyKey, position),
        'authentication_failed',
      ],
      [
        'the job id',
        () => decryptAnswerFrame(1, delta, replyKey, { ...position, jobId: 901n }),
        'authentication_failed',
      ],
      [
        'the attempt',
        () => decryptAnswerFrame(1, delta, replyKey, { ...position, attempt: 2 }),
        'authentication_failed',
      ],
      [
        'the seq',
        () => decryptAnswerFrame(1, delta, replyKey, { ...position, seq: 4 }),
        'authentication_failed',
      ],
      [
        'the kind (a delta replayed as the final)',
        () => decryptAnswerFrame(2, delta, replyKey, position),
        'authentication_failed',
      ],
      [
        'another reply key',
        () => decryptAnswerFrame(1, delta, generateReplyKey(), position),
        'authentication_failed',
      ],
      [
        'a frame shorter than nonce and tag',
        () => decryptAnswerFrame(1, delta.subarray(0, 27), replyKey, position),
        'truncated',
      ],
    ];
    it.each(cases)('%s makes decryption fail with a typed error', (_name, open, reason) => {
      expect(decryptionFailure(open).reason).toBe(reason);
    });

    it('any flipped byte of any frame fails with a typed error (property)', () => {
      fc.assert(
        fc.property(fc.string({ maxLength: 500 }), fc.nat(), (text, offset) => {
          const frame = encryptAnswerFrame(AnswerFrameKind.Final, text, replyKey, position);
          expect(decryptAnswerFrame(AnswerFrameKind.Final, frame, replyKey, position)).toBe(text);
          const failure = decryptionFailure(() =>
            decryptAnswerFrame(
              AnswerFrameKind.Final,
              flipped(frame, offset % frame.length),
              replyKey,
              position,
            ),
          );
          expect(failure.reason).toBe('authentication_failed');
        }),
        { numRuns: 200 },
      );
    });
  });

  it('refuses authentic frames that are not UTF-8 text', () => {
    const nonce = new Uint8Array(12).fill(1);
    const sealed = gcmSeal(
      replyKey,
      nonce,
      answerFrameAad(AnswerFrameKind.Delta, position),
      new Uint8Array([0xc3]),
    );
    const frame = Buffer.concat([nonce, sealed]);
    expect(decryptionFailure(() => decryptAnswerFrame(1, frame, replyKey, position)).reason).toBe(
      'invalid_utf8',
    );
  });

  it('refuses bad arguments before touching the cipher', () => {
    expect(() => encryptAnswerFrame(1, 'x', new Uint8Array(16), position)).toThrow(RangeError);
    expect(() => encryptAnswerFrame(1, 'x', replyKey, { ...position, attempt: 2 ** 32 })).toThrow(RangeError);
    expect(() => encryptAnswerFrame(1, 'x', replyKey, { ...position, seq: -1 })).toThrow(RangeError);
    expect(() => encryptAnswerFrame(1, 'x', replyKey, { ...position, seq: 1.5 })).toThrow(RangeError);
    expect(() => encryptAnswerFrame(3 as AnswerFrameKind, 'x', replyKey, position)).toThrow(RangeError);
    expect(() => encryptAnswerFrame(1, 'x', replyKey, position, { nonce: new Uint8Array(8) })).toThrow(
      RangeError,
    );
  });

  it('hashes the whole final frame wire as the responseHash', () => {
    const frame = encryptAnswerFrame(AnswerFrameKind.Final, 'answer', replyKey, position);
    expect(responseHashOf(frame)).toBe(keccak256(frame));
    expect(responseHashOf(frame)).not.toBe(keccak256(frame.subarray(12)));
  });
});
