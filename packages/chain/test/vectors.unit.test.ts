// Checks the committed vectors against this implementation: every derived value is recomputed from
// the vector's inputs, and every ciphertext is opened again. A second implementation runs the same checks.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { Wallet, ZeroHash, concat, getBytes, hexlify, keccak256, toUtf8Bytes } from 'ethers';
import {
  AnswerFrameKind,
  InvalidPublicKeyError,
  MAX_BLOB_PAYLOAD_BYTES,
  SessionKeyPair,
  answerFrameAad,
  blobSidecarOf,
  commitRootOf,
  decodeBlob,
  decodeBlobPayloads,
  decodePromptPlaintext,
  decryptAnswerFrame,
  decryptPrompt,
  encodeBlob,
  encodePromptPlaintext,
  encryptAnswerFrame,
  encryptPrompt,
  finalAnswerDigest,
  linkChallengeDigest,
  loadKzgTrustedSetup,
  openPrompt,
  parseP256PublicKey,
  promptAad,
  recoverFinalAnswerSigner,
  recoverLinkChallengeSigner,
  responseHashOf,
  signFinalAnswer,
  verifyBlobProof,
} from '../src/index.js';
import { derivePromptKey } from '../src/envelope/prompt-cipher.js';
import { expectSameBytes } from './support/bytes.js';

interface FrameVector {
  seq: number;
  text: string;
  nonce: string;
  aad: string;
  frame: string;
}

interface EnvelopeVectors {
  context: { chainId: string; jobRegistry: string; sessionId: string; jobId: string; attempt: number };
  sessionKey: { privateKey: string; publicKey: string };
  prompt: {
    plaintext: string;
    plaintextHex: string;
    replyKey: string;
    ephemeralPrivateKey: string;
    ephemeralPublicKey: string;
    nonce: string;
    ecdhSharedSecret: string;
    aesKey: string;
    aad: string;
    wire: string;
  };
  answer: { deltas: FrameVector[]; final: FrameVector & { responseHash: string } };
  commitBatch: { rule: string; answers: string[]; roots: string[] };
  workerSignature: { workerPrivateKey: string; workerAddress: string; digest: string; signature: string };
  linkChallenge: {
    fields: {
      orchestrator: string;
      chainId: string;
      jobRegistry: string;
      worker: string;
      nonce: string;
      expiresAt: string;
    };
    digest: string;
    signature: string;
  };
  blobs: Array<{
    name: string;
    payload?: string;
    payloadLength?: number;
    payloadRule?: string;
    blobSha256: string;
    commitment: string;
    proof: string;
    versionedHash: string;
  }>;
  sharedBlob: {
    name: string;
    payloads: string[];
    blobHead: string;
    blobSha256: string;
    commitment: string;
    proof: string;
    versionedHash: string;
  };
  invalidSessionPublicKeys: Array<{ reason: string; note: string; key: string }>;
}

const vectors = JSON.parse(
  readFileSync(new URL('./vectors/envelope.json', import.meta.url), 'utf8'),
) as EnvelopeVectors;

const context = {
  chainId: BigInt(vectors.context.chainId),
  jobRegistry: vectors.context.jobRegistry,
  sessionId: BigInt(vectors.context.sessionId),
  jobId: BigInt(vectors.context.jobId),
  attempt: vectors.context.attempt,
};
const promptBinding = {
  chainId: context.chainId,
  jobRegistry: context.jobRegistry,
  sessionId: context.sessionId,
};
const answerBinding = {
  chainId: context.chainId,
  jobRegistry: context.jobRegistry,
  jobId: context.jobId,
  attempt: context.attempt,
  sessionId: context.sessionId,
};
const session = SessionKeyPair.fromPrivateKey(getBytes(vectors.sessionKey.privateKey));
const replyKey = getBytes(vectors.prompt.replyKey);

describe('envelope vectors', () => {
  it('session key: the public key follows from the private key', () => {
    expect(hexlify(session.publicKey)).toBe(vectors.sessionKey.publicKey);
  });

  it('prompt: plaintext, ECDH secret, HKDF key, AAD and wire follow from the inputs', () => {
    const plaintext = getBytes(vectors.prompt.plaintextHex);
    expect(new TextDecoder().decode(plaintext)).toBe(vectors.prompt.plaintext);
    const prompt = decodePromptPlaintext(plaintext);
    expect(hexlify(prompt.replyKey)).toBe(vectors.prompt.replyKey);
    expect(hexlify(encodePromptPlaintext(prompt))).toBe(vectors.prompt.plaintextHex);

    const ephemeral = SessionKeyPair.fromPrivateKey(getBytes(vectors.prompt.ephemeralPrivateKey));
    expect(hexlify(ephemeral.publicKey)).toBe(vectors.prompt.ephemeralPublicKey);
    const secret = ephemeral.sharedSecretWith(session.publicKey);
    expect(hexlify(secret)).toBe(vectors.prompt.ecdhSharedSecret);
    expect(hexlify(derivePromptKey(secret, ephemeral.publicKey, session.publicKey))).toBe(
      vectors.prompt.aesKey,
    );
    expect(hexlify(promptAad(promptBinding))).toBe(vectors.prompt.aad);

    const wire = encryptPrompt(plaintext, session.publicKey, promptBinding, {
      ephemeralPrivateKey: getBytes(vectors.prompt.ephemeralPrivateKey),
      nonce: getBytes(vectors.prompt.nonce),
    });
    expect(hexlify(wire)).toBe(vectors.prompt.wire);
  });

  it('prompt: the committed wire opens with the session key', () => {
    const wire = getBytes(vectors.prompt.wire);
    expect(hexlify(decryptPrompt(wire, session, promptBinding))).toBe(vectors.prompt.plaintextHex);
    expect(openPrompt(wire, session, promptBinding).model).toBe(
      decodePromptPlaintext(getBytes(vectors.prompt.plaintextHex)).model,
    );
  });

  it('answer: every delta and the final frame follow from the reply key and nonces, and open again', () => {
    const frames: Array<[AnswerFrameKind, FrameVector]> = [
      ...vectors.answer.deltas.map((delta): [AnswerFrameKind, FrameVector] => [AnswerFrameKind.Delta, delta]),
      [AnswerFrameKind.Final, vectors.answer.final],
    ];
    for (const [kind, vector] of frames) {
      const position = { jobId: context.jobId, attempt: context.attempt, seq: vector.seq };
      expect(hexlify(answerFrameAad(kind, position))).toBe(vector.aad);
      const frame = encryptAnswerFrame(kind, vector.text, replyKey, position, {
        nonce: getBytes(vector.nonce),
      });
      expect(hexlify(frame)).toBe(vector.frame);
      expect(decryptAnswerFrame(kind, getBytes(vector.frame), replyKey, position)).toBe(vector.text);
    }
    expect(vectors.answer.deltas.map((delta) => delta.seq)).toEqual([1, 2, 3]);
    expect(vectors.answer.final.seq).toBe(vectors.answer.deltas.length);
    expect(vectors.answer.final.text).toBe(vectors.answer.deltas.map((delta) => delta.text).join(''));
  });

  it('answer: responseHash is keccak256 of the final frame', () => {
    expect(responseHashOf(getBytes(vectors.answer.final.frame))).toBe(vectors.answer.final.responseHash);
  });

  it('commit batch: the root chains the answers from 32 zero bytes', () => {
    const { answers, roots } = vectors.commitBatch;
    expect(answers[0]).toBe(keccak256(toUtf8Bytes('final 0')));
    expect(roots[0]).toBe(keccak256(concat([ZeroHash, answers[0]!])));
    roots.forEach((root, index) => expect(commitRootOf(answers.slice(0, index + 1))).toBe(root));
  });

  it('worker signature: digest, deterministic signature and recovery', async () => {
    const finalFrame = getBytes(vectors.answer.final.frame);
    const worker = new Wallet(vectors.workerSignature.workerPrivateKey);
    expect(worker.address).toBe(vectors.workerSignature.workerAddress);
    expect(finalAnswerDigest(answerBinding, finalFrame)).toBe(vectors.workerSignature.digest);
    expect(await signFinalAnswer(worker, answerBinding, finalFrame)).toBe(vectors.workerSignature.signature);
    expect(recoverFinalAnswerSigner(answerBinding, finalFrame, vectors.workerSignature.signature)).toBe(
      worker.address,
    );
  });

  it('link challenge: digest and recovery, and the two signatures never share a digest', () => {
    const { fields: raw, digest, signature } = vectors.linkChallenge;
    const fields = { ...raw, chainId: BigInt(raw.chainId), expiresAt: BigInt(raw.expiresAt) };
    expect(fields.worker).toBe(vectors.workerSignature.workerAddress);
    expect(linkChallengeDigest(fields)).toBe(digest);
    expect(recoverLinkChallengeSigner(fields, signature)).toBe(vectors.workerSignature.workerAddress);
    expect(digest).not.toBe(vectors.workerSignature.digest);
  });

  it('invalid session public keys are refused for the stated reason', () => {
    expect(vectors.invalidSessionPublicKeys.length).toBeGreaterThan(0);
    for (const { reason, key } of vectors.invalidSessionPublicKeys) {
      let refusal: unknown;
      try {
        parseP256PublicKey(getBytes(key));
      } catch (error) {
        refusal = error;
      }
      expect(refusal).toBeInstanceOf(InvalidPublicKeyError);
      expect((refusal as InvalidPublicKeyError).reason).toBe(reason);
    }
  });
});

describe('blob vectors', () => {
  beforeAll(() => loadKzgTrustedSetup());

  function payloadOf(vector: EnvelopeVectors['blobs'][number]): Uint8Array {
    if (vector.payload !== undefined) return getBytes(vector.payload);
    expect(vector.payloadRule).toBe('byte i = i mod 251');
    const payload = new Uint8Array(vector.payloadLength!);
    for (let i = 0; i < payload.length; i++) payload[i] = i % 251;
    return payload;
  }

  it('covers the smallest payload, the prompt wire and full capacity', () => {
    const lengths = vectors.blobs.map((vector) => payloadOf(vector).length);
    expect(lengths).toEqual([1, getBytes(vectors.prompt.wire).length, MAX_BLOB_PAYLOAD_BYTES]);
  });

  it.each(vectors.blobs.map((vector) => [vector.name, vector] as const))(
    '%s: blob, commitment, proof and versioned hash follow from the payload',
    (_name, vector) => {
      const payload = payloadOf(vector);
      const blob = encodeBlob(payload);
      expect(`0x${createHash('sha256').update(blob).digest('hex')}`).toBe(vector.blobSha256);
      expectSameBytes(decodeBlob(blob), payload);
      const sidecar = blobSidecarOf(payload);
      expect(hexlify(sidecar.commitment)).toBe(vector.commitment);
      expect(hexlify(sidecar.proof)).toBe(vector.proof);
      expect(sidecar.versionedHash).toBe(vector.versionedHash);
      expect(verifyBlobProof(blob, getBytes(vector.commitment), getBytes(vector.proof))).toBe(true);
    },
  );

  it('shared blob: its bytes, commitment, proof and versioned hash follow from the payloads, each back by index', () => {
    const vector = vectors.sharedBlob;
    const payloads = vector.payloads.map((payload) => getBytes(payload));
    expect(payloads.length).toBeGreaterThan(1);
    const blob = encodeBlob(...payloads);
    expect(hexlify(blob.subarray(0, getBytes(vector.blobHead).length))).toBe(vector.blobHead);
    expect(`0x${createHash('sha256').update(blob).digest('hex')}`).toBe(vector.blobSha256);
    const decoded = decodeBlobPayloads(blob);
    expect(decoded.map((payload) => hexlify(payload))).toEqual(vector.payloads);
    payloads.forEach((payload, index) => expectSameBytes(decodeBlob(blob, index), payload));
    const sidecar = blobSidecarOf(...payloads);
    expectSameBytes(sidecar.data, blob);
    expect(hexlify(sidecar.commitment)).toBe(vector.commitment);
    expect(hexlify(sidecar.proof)).toBe(vector.proof);
    expect(sidecar.versionedHash).toBe(vector.versionedHash);
    expect(verifyBlobProof(blob, getBytes(vector.commitment), getBytes(vector.proof))).toBe(true);
  });
});
