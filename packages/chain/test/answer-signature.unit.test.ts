import { describe, expect, it } from '@jest/globals';
import {
  AbiCoder,
  Signature,
  Wallet,
  concat,
  getBytes,
  id,
  keccak256,
  toBeHex,
  toUtf8Bytes,
  zeroPadValue,
} from 'ethers';
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
  it("signs EIP-712 FinalAnswer(jobId, attempt, sessionId, responseHash) in JobRegistry's domain", async () => {
    // Spelled out from the spec (docs/protocol.md, Worker signature), not from ethers' typed-data encoder.
    const coder = AbiCoder.defaultAbiCoder();
    const domainSeparator = keccak256(
      coder.encode(
        ['bytes32', 'bytes32', 'bytes32', 'uint256', 'address'],
        [
          id('EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)'),
          id('JobRegistry'),
          id('1'),
          binding.chainId,
          binding.jobRegistry,
        ],
      ),
    );
    const structHash = keccak256(
      concat([
        id('FinalAnswer(uint256 jobId,uint256 attempt,uint256 sessionId,bytes32 responseHash)'),
        toBeHex(binding.jobId, 32),
        toBeHex(binding.attempt, 32),
        toBeHex(binding.sessionId, 32),
        keccak256(finalFrame),
      ]),
    );
    const digest = finalAnswerDigest(binding, finalFrame);
    expect(digest).toBe(keccak256(concat(['0x1901', domainSeparator, structHash])));

    const signature = await signFinalAnswer(worker, binding, finalFrame);
    expect(Signature.from(signature).v).toBeGreaterThanOrEqual(27);
    expect(recoverFinalAnswerSigner(binding, finalFrame, signature)).toBe(worker.address);
    // The raw digest signed, with no EIP-191 prefix: what the contract's _hashTypedDataV4 recovers from.
    expect(new Wallet(worker.privateKey).signingKey.sign(digest).serialized).toBe(signature);
  });

  it('refuses a personal_sign over the digest (the old format, which any signed text could forge)', async () => {
    // The audit's attack: a link challenge whose bytes were a dispute digest, personal_signed by the
    // worker, passed as a signed final. A personal_sign of anything is no final now.
    const digest = finalAnswerDigest(binding, finalFrame);
    const personal = await worker.signMessage(getBytes(digest));
    expect(isFinalAnswerSignedBy(worker.address, binding, finalFrame, personal)).toBe(false);
    const oldDigest = keccak256(
      concat([
        toBeHex(binding.chainId, 32),
        zeroPadValue(binding.jobRegistry, 32),
        toBeHex(binding.jobId, 32),
        toBeHex(binding.attempt, 32),
        toBeHex(binding.sessionId, 32),
        keccak256(finalFrame),
      ]),
    );
    const oldStyle = await worker.signMessage(getBytes(oldDigest));
    expect(isFinalAnswerSignedBy(worker.address, binding, finalFrame, oldStyle)).toBe(false);
    const text = await worker.signMessage(toUtf8Bytes('any text an orchestrator sends'));
    expect(isFinalAnswerSignedBy(worker.address, binding, finalFrame, text)).toBe(false);
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
