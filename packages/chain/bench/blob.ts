// npm run bench: what one full-size prompt costs on this machine before its transaction is signed.
// Prints medians of several runs; compare the lines with each other, not across machines.
import { randomBytes } from 'node:crypto';
import {
  MAX_BLOB_PAYLOAD_BYTES,
  MAX_PROMPT_PLAINTEXT_BYTES,
  SessionKeyPair,
  commitmentOf,
  decodeBlob,
  encodeBlob,
  encryptPrompt,
  loadKzgTrustedSetup,
  proofOf,
  verifyBlobProof,
} from '../src/index.js';

const RUNS = Number(process.env['BENCH_RUNS'] ?? 15);

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

function measure<T>(label: string, prepare: () => T, run: (input: T) => unknown): number {
  run(prepare()); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const input = prepare();
    const started = process.hrtime.bigint();
    run(input);
    samples.push(Number(process.hrtime.bigint() - started) / 1e6);
  }
  const result = median(samples);
  console.log(`${label.padEnd(48)} ${result.toFixed(3).padStart(10)} ms  (median of ${RUNS})`);
  return result;
}

const setupStarted = process.hrtime.bigint();
loadKzgTrustedSetup();
console.log(
  `${'load KZG trusted setup (once per process)'.padEnd(48)} ${(Number(process.hrtime.bigint() - setupStarted) / 1e6).toFixed(3).padStart(10)} ms`,
);

const session = SessionKeyPair.generate();
const binding = { chainId: 31337n, jobRegistry: '0x5FbDB2315678afecb367f032d93F642f64180aa3', sessionId: 1n };

const encrypt = measure(
  `encrypt a full-size prompt (${MAX_PROMPT_PLAINTEXT_BYTES} B)`,
  () => randomBytes(MAX_PROMPT_PLAINTEXT_BYTES),
  (plaintext) => encryptPrompt(plaintext, session.publicKey, binding),
);
const encode = measure(
  `encode a full blob (${MAX_BLOB_PAYLOAD_BYTES} B payload)`,
  () => randomBytes(MAX_BLOB_PAYLOAD_BYTES),
  (payload) => encodeBlob(payload),
);
measure(
  'decode a full blob',
  () => encodeBlob(randomBytes(MAX_BLOB_PAYLOAD_BYTES)),
  (blob) => decodeBlob(blob),
);
const commit = measure(
  'KZG commitment of a full blob',
  () => encodeBlob(randomBytes(MAX_BLOB_PAYLOAD_BYTES)),
  (blob) => commitmentOf(blob),
);
const prove = measure(
  'KZG proof of a full blob',
  () => {
    const blob = encodeBlob(randomBytes(MAX_BLOB_PAYLOAD_BYTES));
    return { blob, commitment: commitmentOf(blob) };
  },
  ({ blob, commitment }) => proofOf(blob, commitment),
);
measure(
  'KZG proof verification (what a node does)',
  () => {
    const blob = encodeBlob(randomBytes(MAX_BLOB_PAYLOAD_BYTES));
    const commitment = commitmentOf(blob);
    return { blob, commitment, proof: proofOf(blob, commitment) };
  },
  ({ blob, commitment, proof }) => verifyBlobProof(blob, commitment, proof),
);

const total = encrypt + encode + commit + prove;
console.log(`${'encrypt + encode + commit + prove'.padEnd(48)} ${total.toFixed(3).padStart(10)} ms`);
console.log(
  `share of that spent in KZG: ${(((commit + prove) / total) * 100).toFixed(1)}%; ` +
    `encode is ${((encode / total) * 100).toFixed(2)}%, encryption ${((encrypt / total) * 100).toFixed(2)}%`,
);
