// Writes test/vectors/envelope.json: fixed inputs and every value derived from them (prompt envelope,
// answer frames, responseHash, worker signature, blobs), so a second implementation can check itself.
// Every input is sha256 of a label, so the file is reproducible byte for byte.
//   node --import tsx scripts/make-vectors.ts           regenerate
//   node --import tsx scripts/make-vectors.ts --check   fail if the committed file differs
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Wallet, hexlify, keccak256, toUtf8Bytes } from 'ethers';
import { format, resolveConfig } from 'prettier';
import {
  AnswerFrameKind,
  MAX_BLOB_PAYLOAD_BYTES,
  SessionKeyPair,
  answerFrameAad,
  blobSidecarOf,
  commitRootOf,
  encodeBlob,
  encodePromptPlaintext,
  encryptAnswerFrame,
  encryptPrompt,
  finalAnswerDigest,
  linkChallengeDigest,
  promptAad,
  responseHashOf,
  signFinalAnswer,
  signLinkChallenge,
  type LinkChallengeFields,
  type Prompt,
} from '../src/index.js';
import { derivePromptKey } from '../src/envelope/prompt-cipher.js';

const VECTORS_PATH = fileURLToPath(new URL('../test/vectors/envelope.json', import.meta.url));

function seed(label: string, bytes = 32): Uint8Array {
  return new Uint8Array(createHash('sha256').update(`svc/vectors/${label}`).digest().subarray(0, bytes));
}

const sha256Hex = (bytes: Uint8Array): string => `0x${createHash('sha256').update(bytes).digest('hex')}`;

async function buildVectors(): Promise<unknown> {
  const context = {
    chainId: 31337n,
    jobRegistry: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
    sessionId: 258n,
    jobId: 66051n,
    attempt: 2,
  };
  const binding = {
    chainId: context.chainId,
    jobRegistry: context.jobRegistry,
    sessionId: context.sessionId,
  };

  const session = SessionKeyPair.fromPrivateKey(seed('session-private-key'));
  const ephemeralPrivateKey = seed('ephemeral-private-key');
  const ephemeral = SessionKeyPair.fromPrivateKey(ephemeralPrivateKey);
  const promptNonce = seed('prompt-nonce', 12);
  const replyKey = seed('reply-key');
  const prompt: Prompt = {
    model: 'llama3.2:1b',
    messages: [
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: 'Say hello to the wörld 🌍' },
    ],
    replyKey,
  };
  const plaintext = encodePromptPlaintext(prompt);
  const sharedSecret = ephemeral.sharedSecretWith(session.publicKey);
  const promptWire = encryptPrompt(plaintext, session.publicKey, binding, {
    ephemeralPrivateKey,
    nonce: promptNonce,
  });

  const deltaTexts = ['Hello', ', wörld', '! 🌍'];
  const deltas = deltaTexts.map((text, index) => {
    const position = { jobId: context.jobId, attempt: context.attempt, seq: index + 1 };
    const nonce = seed(`delta-nonce-${position.seq}`, 12);
    return {
      seq: position.seq,
      text,
      nonce: hexlify(nonce),
      aad: hexlify(answerFrameAad(AnswerFrameKind.Delta, position)),
      frame: hexlify(encryptAnswerFrame(AnswerFrameKind.Delta, text, replyKey, position, { nonce })),
    };
  });

  const finalPosition = { jobId: context.jobId, attempt: context.attempt, seq: deltaTexts.length };
  const finalNonce = seed('final-nonce', 12);
  const finalText = deltaTexts.join('');
  const finalFrame = encryptAnswerFrame(AnswerFrameKind.Final, finalText, replyKey, finalPosition, {
    nonce: finalNonce,
  });
  const worker = new Wallet(hexlify(seed('worker-private-key')));
  const answerBinding = {
    chainId: context.chainId,
    jobRegistry: context.jobRegistry,
    jobId: context.jobId,
    attempt: context.attempt,
    sessionId: context.sessionId,
  };

  const linkChallenge: LinkChallengeFields = {
    orchestrator: 'svc job-orchestrator',
    chainId: context.chainId,
    jobRegistry: context.jobRegistry,
    worker: worker.address,
    nonce: hexlify(seed('link-nonce')),
    expiresAt: 1_800_000_000n,
  };

  const blobPayloads = [
    { name: 'one zero byte', payload: new Uint8Array(1) },
    { name: 'the prompt wire above', payload: promptWire },
    { name: 'full capacity', payload: fullCapacityPayload() },
  ];

  return {
    description:
      'Envelope and blob test vectors (docs/protocol.md, Blob format and Encryption). All byte strings are 0x-hex; ids are decimal strings. ' +
      'Inputs are sha256("svc/vectors/<label>") (nonces: its first 12 bytes). A blob entry too long to spell out ' +
      'gives payloadLength and payloadRule instead of payload; sharedBlob carries several payloads (blobHead: its first 96 bytes). ' +
      'Regenerate with scripts/make-vectors.ts.',
    layouts: {
      blob: 'frames (4-byte big-endian length ≥ 1 ‖ payload) one after another, then zero bytes (a zero length or fewer than 4 bytes left ends the list); that stream packed 31 bytes per 32-byte field element (byte 0 = 0x00), 4096 elements',
      versionedHash: '0x01 ‖ sha256(KZG commitment)[1:]',
      promptWire: '0x01 ‖ ephemeral P-256 public key (65) ‖ nonce (12) ‖ AES-256-GCM ciphertext ‖ tag (16)',
      promptKey:
        'HKDF-SHA256(ikm = ECDH x coordinate, salt = ephemeral pub ‖ session pub, info = "svc/prompt/v1", length 32)',
      promptAad: '"svc/prompt/v1" ‖ uint256be(chainId) ‖ JobRegistry address (20) ‖ uint256be(sessionId)',
      answerFrame: 'nonce (12) ‖ AES-256-GCM ciphertext of UTF-8 text under replyKey ‖ tag (16)',
      answerAad: 'kind (1 delta, 2 final) ‖ uint256be(jobId) ‖ uint32be(attempt) ‖ uint32be(seq)',
      responseHash: 'keccak256(whole final frame: nonce ‖ ciphertext ‖ tag)',
      workerSignature:
        'EIP-712 typed data FinalAnswer(uint256 jobId,uint256 attempt,uint256 sessionId,bytes32 responseHash) in the domain {name "JobRegistry", version "1", chainId, verifyingContract = JobRegistry}; digest = keccak256(0x1901 ‖ domainSeparator ‖ hashStruct)',
      linkChallenge:
        'EIP-712 typed data LinkChallenge(string orchestrator,address worker,address jobRegistry,bytes32 nonce,uint64 expiresAt) in the domain {name "svc worker link", version "1", chainId}',
    },
    context: {
      chainId: context.chainId.toString(),
      jobRegistry: context.jobRegistry,
      sessionId: context.sessionId.toString(),
      jobId: context.jobId.toString(),
      attempt: context.attempt,
    },
    sessionKey: { privateKey: hexlify(session.exportPrivateKey()), publicKey: hexlify(session.publicKey) },
    prompt: {
      plaintext: new TextDecoder().decode(plaintext),
      plaintextHex: hexlify(plaintext),
      replyKey: hexlify(replyKey),
      ephemeralPrivateKey: hexlify(ephemeralPrivateKey),
      ephemeralPublicKey: hexlify(ephemeral.publicKey),
      nonce: hexlify(promptNonce),
      ecdhSharedSecret: hexlify(sharedSecret),
      aesKey: hexlify(derivePromptKey(sharedSecret, ephemeral.publicKey, session.publicKey)),
      aad: hexlify(promptAad(binding)),
      wire: hexlify(promptWire),
    },
    answer: {
      deltas,
      final: {
        seq: finalPosition.seq,
        text: finalText,
        nonce: hexlify(finalNonce),
        aad: hexlify(answerFrameAad(AnswerFrameKind.Final, finalPosition)),
        frame: hexlify(finalFrame),
        responseHash: responseHashOf(finalFrame),
      },
    },
    commitBatch: (() => {
      const answers = [0, 1, 2].map((index) => keccak256(toUtf8Bytes(`final ${index}`)));
      return {
        rule: 'root0 = 32 zero bytes; root(k+1) = keccak256(root(k) ‖ responseHash(k))',
        answers,
        roots: answers.map((_, index) => commitRootOf(answers.slice(0, index + 1))),
      };
    })(),
    workerSignature: {
      workerPrivateKey: worker.privateKey,
      workerAddress: worker.address,
      digest: finalAnswerDigest(answerBinding, finalFrame),
      signature: await signFinalAnswer(worker, answerBinding, finalFrame),
    },
    linkChallenge: {
      fields: {
        ...linkChallenge,
        chainId: linkChallenge.chainId.toString(),
        expiresAt: linkChallenge.expiresAt.toString(),
      },
      digest: linkChallengeDigest(linkChallenge),
      signature: await signLinkChallenge(worker, linkChallenge, {
        chainId: linkChallenge.chainId,
        jobRegistry: linkChallenge.jobRegistry,
        worker: worker.address,
        nowMs: Number(linkChallenge.expiresAt) * 1000 - 30_000,
      }),
    },
    blobs: blobPayloads.map(({ name, payload }) => {
      const sidecar = blobSidecarOf(payload);
      const spelledOut = payload.length <= 1024;
      return {
        name,
        ...(spelledOut
          ? { payload: hexlify(payload) }
          : { payloadLength: payload.length, payloadRule: FULL_CAPACITY_RULE }),
        blobSha256: sha256Hex(encodeBlob(payload)),
        commitment: hexlify(sidecar.commitment),
        proof: hexlify(sidecar.proof),
        versionedHash: sidecar.versionedHash,
      };
    }),
    sharedBlob: sharedBlobVector(),
    invalidSessionPublicKeys: invalidPublicKeys(session.publicKey),
  };
}

const FULL_CAPACITY_RULE = 'byte i = i mod 251';

const SHARED_BLOB_HEAD_BYTES = 96;

/** Two payloads in one blob: payload 0 and payload 1, framed one after the other. */
function sharedBlobVector(): unknown {
  const payloads = [Uint8Array.from([1, 2, 3, 4, 5]), Uint8Array.from({ length: 40 }, (_, i) => i)];
  const sidecar = blobSidecarOf(...payloads);
  return {
    name: 'two payloads in one blob',
    payloads: payloads.map((payload) => hexlify(payload)),
    blobHead: hexlify(sidecar.data.subarray(0, SHARED_BLOB_HEAD_BYTES)),
    blobSha256: sha256Hex(sidecar.data),
    commitment: hexlify(sidecar.commitment),
    proof: hexlify(sidecar.proof),
    versionedHash: sidecar.versionedHash,
  };
}

function fullCapacityPayload(): Uint8Array {
  const payload = new Uint8Array(MAX_BLOB_PAYLOAD_BYTES);
  for (let i = 0; i < payload.length; i++) payload[i] = i % 251;
  return payload;
}

function invalidPublicKeys(valid: Uint8Array): Array<{ reason: string; note: string; key: string }> {
  const offCurve = new Uint8Array(valid);
  offCurve[64]! ^= 0x01;
  const wrongPrefix = new Uint8Array(valid);
  wrongPrefix[0] = 0x03;
  const origin = new Uint8Array(65);
  origin[0] = 0x04;
  return [
    { reason: 'wrong_length', note: 'compressed form (33 bytes)', key: hexlify(compress(valid)) },
    { reason: 'wrong_length', note: 'x and y without prefix (64 bytes)', key: hexlify(valid.subarray(1)) },
    { reason: 'wrong_prefix', note: '65 bytes with prefix 0x03', key: hexlify(wrongPrefix) },
    { reason: 'not_on_curve', note: 'valid key with the last bit of y flipped', key: hexlify(offCurve) },
    { reason: 'not_on_curve', note: 'the point (0, 0)', key: hexlify(origin) },
  ];
}

function compress(uncompressed: Uint8Array): Uint8Array {
  const compressed = new Uint8Array(33);
  compressed[0] = 0x02 | (uncompressed[64]! & 1);
  compressed.set(uncompressed.subarray(1, 33), 1);
  return compressed;
}

async function main(): Promise<void> {
  const json = JSON.stringify(await buildVectors(), null, 2);
  const formatted = await format(json, { ...(await resolveConfig(VECTORS_PATH)), filepath: VECTORS_PATH });
  if (process.argv.includes('--check')) {
    const committed = readFileSync(VECTORS_PATH, 'utf8');
    if (committed !== formatted) {
      process.stderr.write(`${VECTORS_PATH} is stale: run scripts/make-vectors.ts\n`);
      process.exit(1);
    }
    process.stdout.write(`${VECTORS_PATH} is up to date\n`);
    return;
  }
  writeFileSync(VECTORS_PATH, formatted);
  process.stdout.write(`wrote ${VECTORS_PATH}\n`);
}

await main();
