import { describe, expect, it } from '@jest/globals';
import { Signature, Wallet, concat, getBytes, hashMessage, keccak256, toBeHex, zeroPadValue } from 'ethers';
import {
  AnswerFrameKind,
  InvalidAnswerSignatureError,
  encryptAnswerFrame,
  finalAnswerDigest,
  generateReplyKey,
  isFinalAnswerSignedBy,
  recoverFinalAnswerSigner,
  signFinalAnswer,
  type FinalAnswerBinding,
} from '../src/index.js';

const SECP256K1_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

const worker = Wallet.createRandom();
const binding: FinalAnswerBinding = {
  chainId: 31337n,
  jobRegistry: '0x5fbdb2315678afecb367f032d93f642f64180aa3',
  jobId: 77n,
  attempt: 2,
  sessionId: 9n,
};
const finalFrame = encryptAnswerFrame(AnswerFrameKind.Final, 'the answer', generateReplyKey(), {
  jobId: 77n,
  attempt: 2,
  seq: 4,
});

function signatureFailure(signature: string): InvalidAnswerSignatureError {
  try {
    recoverFinalAnswerSigner(binding, finalFrame, signature);
  } catch (error) {
    if (error instanceof InvalidAnswerSignatureError) return error;
    throw error;
  }
  throw new Error('the signature was accepted');
}

describe('worker signature over a final answer', () => {
  it('signs keccak256(abi.encode(chainId, jobRegistry, jobId, attempt, sessionId, keccak256(frame))) as an EIP-191 message', async () => {
    const words = concat([
      toBeHex(binding.chainId, 32),
      zeroPadValue(binding.jobRegistry, 32),
      toBeHex(binding.jobId, 32),
      toBeHex(binding.attempt, 32),
      toBeHex(binding.sessionId, 32),
      keccak256(finalFrame),
    ]);
    const digest = finalAnswerDigest(binding, finalFrame);
    expect(digest).toBe(keccak256(words));

    const signature = await signFinalAnswer(worker, binding, finalFrame);
    // personal_sign over the 32 raw digest bytes, which is what the contract's toEthSignedMessageHash does.
    const prefixed = hashMessage(getBytes(digest));
    expect(Signature.from(signature).v).toBeGreaterThanOrEqual(27);
    expect(recoverFinalAnswerSigner(binding, finalFrame, signature)).toBe(worker.address);
    expect(new Wallet(worker.privateKey).signingKey.sign(prefixed).serialized).toBe(signature);
  });

  it('binds the attempt and the session: the same frame signed for another attempt or session is another digest', async () => {
    // The audit's case: a final signed for an attempt that timed out must not count against the
    // attempt the same worker answered honestly afterwards, in the same session or another.
    const digest = finalAnswerDigest(binding, finalFrame);
    const others = [
      finalAnswerDigest({ ...binding, attempt: 1 }, finalFrame),
      finalAnswerDigest({ ...binding, attempt: 3 }, finalFrame),
      finalAnswerDigest({ ...binding, sessionId: 8n }, finalFrame),
      finalAnswerDigest({ ...binding, sessionId: 10n }, finalFrame),
      // The two fields swapped: each is its own word, so values do not slide from one into the other.
      finalAnswerDigest({ ...binding, attempt: 9, sessionId: 2n }, finalFrame),
    ];
    expect(new Set([digest, ...others]).size).toBe(others.length + 1);

    const signature = await signFinalAnswer(worker, { ...binding, attempt: 1 }, finalFrame);
    expect(isFinalAnswerSignedBy(worker.address, { ...binding, attempt: 1 }, finalFrame, signature)).toBe(
      true,
    );
    expect(isFinalAnswerSignedBy(worker.address, binding, finalFrame, signature)).toBe(false);
    expect(recoverFinalAnswerSigner(binding, finalFrame, signature)).not.toBe(worker.address);
    expect(
      isFinalAnswerSignedBy(worker.address, { ...binding, attempt: 1, sessionId: 8n }, finalFrame, signature),
    ).toBe(false);
  });

  it('verifies against the worker and nobody else, for this frame and binding only', async () => {
    const signature = await signFinalAnswer(worker, binding, finalFrame);
    expect(isFinalAnswerSignedBy(worker.address, binding, finalFrame, signature)).toBe(true);
    expect(isFinalAnswerSignedBy(worker.address.toLowerCase(), binding, finalFrame, signature)).toBe(true);
    expect(isFinalAnswerSignedBy(Wallet.createRandom().address, binding, finalFrame, signature)).toBe(false);

    const otherFrame = new Uint8Array(finalFrame);
    otherFrame[20]! ^= 1;
    expect(isFinalAnswerSignedBy(worker.address, binding, otherFrame, signature)).toBe(false);
    expect(isFinalAnswerSignedBy(worker.address, { ...binding, jobId: 78n }, finalFrame, signature)).toBe(
      false,
    );
    expect(isFinalAnswerSignedBy(worker.address, { ...binding, chainId: 1n }, finalFrame, signature)).toBe(
      false,
    );
    expect(
      isFinalAnswerSignedBy(
        worker.address,
        { ...binding, jobRegistry: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512' },
        finalFrame,
        signature,
      ),
    ).toBe(false);
  });

  it('accepts only what the contract accepts: 65 bytes, v 27 or 28, low s', async () => {
    const signature = await signFinalAnswer(worker, binding, finalFrame);
    const parsed = Signature.from(signature);

    expect(signatureFailure('0x1234').reason).toBe('malformed');
    expect(signatureFailure('not hex').reason).toBe('malformed');
    expect(signatureFailure(parsed.compactSerialized).reason).toBe('malformed'); // EIP-2098, 64 bytes
    expect(
      signatureFailure(`${signature.slice(0, -2)}${(parsed.v - 27).toString(16).padStart(2, '0')}`).reason,
    ).toBe('malformed');

    const highS = toBeHex(SECP256K1_ORDER - BigInt(parsed.s), 32);
    const flippedV = parsed.v === 27 ? '1c' : '1b';
    const malleated = `${parsed.r}${highS.slice(2)}${flippedV}`;
    expect(signatureFailure(malleated).reason).toBe('non_canonical');
    expect(isFinalAnswerSignedBy(worker.address, binding, finalFrame, malleated)).toBe(false);
  });
});
