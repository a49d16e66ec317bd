import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  EnvelopeDecryptionError,
  InvalidPublicKeyError,
  MAX_BLOB_PAYLOAD_BYTES,
  MAX_PROMPT_PLAINTEXT_BYTES,
  PROMPT_ENVELOPE_OVERHEAD_BYTES,
  SessionKeyPair,
  decodeBlob,
  decryptPrompt,
  encodeBlob,
  encodePromptPlaintext,
  encryptPrompt,
  generateReplyKey,
  openPrompt,
  promptFitsOneBlob,
  type Prompt,
  type PromptBinding,
} from '../src/index.js';
import { expectSameBytes } from './support/bytes.js';

const session = SessionKeyPair.generate();
const binding: PromptBinding = {
  chainId: 31337n,
  jobRegistry: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
  sessionId: 12n,
};
const plaintext = new TextEncoder().encode('{"v":1} stands in for a prompt');

function decryptionFailure(open: () => unknown): EnvelopeDecryptionError {
  try {
    open();
  } catch (error) {
    if (error instanceof EnvelopeDecryptionError) return error;
    throw error;
  }
  throw new Error('the envelope opened');
}

function flipped(wire: Uint8Array, offset: number): Uint8Array {
  const copy = new Uint8Array(wire);
  copy[offset]! ^= 0x01;
  return copy;
}

describe('prompt envelope', () => {
  it('round-trips and lays the wire out as version ‖ ephemeral key ‖ nonce ‖ ciphertext ‖ tag', () => {
    const wire = encryptPrompt(plaintext, session.publicKey, binding);
    expect(wire.length).toBe(plaintext.length + PROMPT_ENVELOPE_OVERHEAD_BYTES);
    expect(wire[0]).toBe(0x01);
    expect(wire[1]).toBe(0x04); // the ephemeral public key follows uncompressed
    expect(decryptPrompt(wire, session, binding)).toEqual(plaintext);
  });

  it('uses a fresh ephemeral key and nonce for every encryption', () => {
    const first = encryptPrompt(plaintext, session.publicKey, binding);
    const second = encryptPrompt(plaintext, session.publicKey, binding);
    expect(first.subarray(1, 66)).not.toEqual(second.subarray(1, 66));
    expect(first.subarray(66, 78)).not.toEqual(second.subarray(66, 78));
  });

  it('round-trips any plaintext, and fails with a typed error on any flipped byte (property)', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4096 }), fc.nat(), (bytes, position) => {
        const wire = encryptPrompt(bytes, session.publicKey, binding);
        expect(decryptPrompt(wire, session, binding)).toEqual(bytes);
        expect(
          decryptionFailure(() => decryptPrompt(flipped(wire, position % wire.length), session, binding)),
        ).toBeInstanceOf(EnvelopeDecryptionError);
      }),
      { numRuns: 150 },
    );
  });

  describe('tampering', () => {
    const wire = encryptPrompt(plaintext, session.publicKey, binding);
    const cases: Array<[string, () => unknown, EnvelopeDecryptionError['reason']]> = [
      [
        'a ciphertext byte',
        () => decryptPrompt(flipped(wire, 78), session, binding),
        'authentication_failed',
      ],
      [
        'a tag byte',
        () => decryptPrompt(flipped(wire, wire.length - 1), session, binding),
        'authentication_failed',
      ],
      ['a nonce byte', () => decryptPrompt(flipped(wire, 70), session, binding), 'authentication_failed'],
      [
        'the ephemeral key',
        () => decryptPrompt(flipped(wire, 64), session, binding),
        'invalid_ephemeral_key',
      ],
      ['the version byte', () => decryptPrompt(flipped(wire, 0), session, binding), 'unsupported_version'],
      [
        'the chain id',
        () => decryptPrompt(wire, session, { ...binding, chainId: 1n }),
        'authentication_failed',
      ],
      [
        'the JobRegistry address',
        () =>
          decryptPrompt(wire, session, {
            ...binding,
            jobRegistry: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512',
          }),
        'authentication_failed',
      ],
      [
        'the session id',
        () => decryptPrompt(wire, session, { ...binding, sessionId: 13n }),
        'authentication_failed',
      ],
      [
        'another session key',
        () => decryptPrompt(wire, SessionKeyPair.generate(), binding),
        'authentication_failed',
      ],
      ['a truncated wire', () => decryptPrompt(wire.subarray(0, 93), session, binding), 'truncated'],
      [
        'a wire cut short inside the tag',
        () => decryptPrompt(wire.subarray(0, wire.length - 1), session, binding),
        'authentication_failed',
      ],
    ];
    it.each(cases)('%s makes decryption fail with a typed error', (_name, open, reason) => {
      expect(decryptionFailure(open).reason).toBe(reason);
    });
  });

  it('refuses to encrypt to an invalid session key', () => {
    const offCurve = new Uint8Array(session.publicKey);
    offCurve[64]! ^= 0x01;
    expect(() => encryptPrompt(plaintext, offCurve, binding)).toThrow(InvalidPublicKeyError);
    expect(() => encryptPrompt(plaintext, session.publicKey.subarray(1), binding)).toThrow(
      InvalidPublicKeyError,
    );
  });

  it('refuses ids outside uint256 and malformed registry addresses', () => {
    expect(() => encryptPrompt(plaintext, session.publicKey, { ...binding, sessionId: -1n })).toThrow(
      RangeError,
    );
    expect(() => encryptPrompt(plaintext, session.publicKey, { ...binding, chainId: 1n << 256n })).toThrow(
      RangeError,
    );
    expect(() =>
      encryptPrompt(plaintext, session.publicKey, { ...binding, jobRegistry: '0x1234' }),
    ).toThrow();
  });
});

describe('blob size rule', () => {
  it('allows 126,972 − 94 bytes of plaintext', () => {
    expect(MAX_PROMPT_PLAINTEXT_BYTES).toBe(126_972 - (1 + 65 + 12 + 16));
    expect(promptFitsOneBlob(MAX_PROMPT_PLAINTEXT_BYTES)).toBe(true);
    expect(promptFitsOneBlob(MAX_PROMPT_PLAINTEXT_BYTES + 1)).toBe(false);
    expect(promptFitsOneBlob(new Uint8Array(MAX_PROMPT_PLAINTEXT_BYTES))).toBe(true);
  });

  it('a plaintext that fits gives a wire that fills one blob exactly, and one more byte does not fit', () => {
    const largest = encryptPrompt(
      new Uint8Array(MAX_PROMPT_PLAINTEXT_BYTES).fill(0x61),
      session.publicKey,
      binding,
    );
    expect(largest.length).toBe(MAX_BLOB_PAYLOAD_BYTES);
    expectSameBytes(decodeBlob(encodeBlob(largest)), largest);
    const tooLarge = encryptPrompt(
      new Uint8Array(MAX_PROMPT_PLAINTEXT_BYTES + 1),
      session.publicKey,
      binding,
    );
    expect(() => encodeBlob(tooLarge)).toThrow();
  });
});

describe('openPrompt', () => {
  it('takes a prompt from blob payload back to the validated prompt', () => {
    const prompt: Prompt = {
      model: 'llama3.2:1b',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi 👋' },
      ],
      replyKey: generateReplyKey(),
    };
    const wire = encryptPrompt(encodePromptPlaintext(prompt), session.publicKey, binding);
    const opened = openPrompt(decodeBlob(encodeBlob(wire)), session, binding);
    expect(opened.model).toBe(prompt.model);
    expect(opened.messages).toEqual(prompt.messages);
    expect(opened.replyKey).toEqual(prompt.replyKey);
  });
});
