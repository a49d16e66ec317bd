import { createHash } from 'node:crypto';
import ckzg from 'c-kzg';
import type { KzgLibrary } from 'ethers';
import { MalformedBlobError } from '../errors.js';
import { BLOB_BYTES, encodeBlob } from './codec.js';

export const KZG_COMMITMENT_BYTES = 48;
export const KZG_PROOF_BYTES = 48;
export const VERSIONED_HASH_VERSION_KZG = 0x01;

// Only the EIP-7594 cell functions use precomputed tables; the EIP-4844 functions used here do not.
const PRECOMPUTE = 0;

let trustedSetupLoaded = false;

/**
 * Loads the Ethereum mainnet KZG ceremony setup that ships with c-kzg. Every KZG function calls it
 * lazily; call it at startup to keep the one-off cost (about 2.5 s on these machines) out of the
 * first request.
 */
export function loadKzgTrustedSetup(): void {
  if (trustedSetupLoaded) return;
  try {
    ckzg.loadTrustedSetup(PRECOMPUTE);
  } catch (error) {
    // The native setup is per process: another copy of this module (a second jest module registry,
    // another package) may have loaded it already, which is the state we want. That copy may live in
    // another realm, so `instanceof Error` cannot be trusted here; the message can.
    const message =
      typeof error === 'object' && error !== null ? (error as { message?: unknown }).message : error;
    if (!/already loaded/i.test(String(message))) throw error;
  }
  trustedSetupLoaded = true;
}

function requireBlob(blob: Uint8Array): void {
  if (blob.length !== BLOB_BYTES) {
    throw new MalformedBlobError('wrong_size', `a blob is ${BLOB_BYTES} bytes, got ${blob.length}`);
  }
}

function requireLength(bytes: Uint8Array, expected: number, what: string): void {
  if (bytes.length !== expected)
    throw new RangeError(`${what} must be ${expected} bytes, got ${bytes.length}`);
}

/** The 48-byte KZG commitment of a blob. */
export function commitmentOf(blob: Uint8Array): Uint8Array {
  requireBlob(blob);
  loadKzgTrustedSetup();
  try {
    return ckzg.blobToKzgCommitment(blob);
  } catch (error) {
    // The only input c-kzg refuses at this size is a field element at or above the BLS modulus.
    throw new MalformedBlobError('not_canonical', 'blob holds a field element c-kzg refuses', {
      cause: error,
    });
  }
}

/** The 48-byte KZG proof that `blob` matches `commitment` (EIP-4844 blob proof). */
export function proofOf(blob: Uint8Array, commitment: Uint8Array): Uint8Array {
  requireBlob(blob);
  requireLength(commitment, KZG_COMMITMENT_BYTES, 'KZG commitment');
  loadKzgTrustedSetup();
  try {
    return ckzg.computeBlobKzgProof(blob, commitment);
  } catch (error) {
    throw new MalformedBlobError('not_canonical', 'c-kzg refused the blob or commitment', { cause: error });
  }
}

/** True when `proof` proves that `commitment` commits to `blob`; false for any invalid input. */
export function verifyBlobProof(blob: Uint8Array, commitment: Uint8Array, proof: Uint8Array): boolean {
  if (
    blob.length !== BLOB_BYTES ||
    commitment.length !== KZG_COMMITMENT_BYTES ||
    proof.length !== KZG_PROOF_BYTES
  ) {
    return false;
  }
  loadKzgTrustedSetup();
  try {
    return ckzg.verifyBlobKzgProof(blob, commitment, proof);
  } catch {
    // c-kzg throws for points not on the curve and non-canonical field elements: not a valid proof.
    return false;
  }
}

/** EIP-4844 versioned hash, as `blobhash(i)` returns it on chain: 0x01 ‖ sha256(commitment)[1:]. */
export function versionedHash(commitment: Uint8Array): string {
  requireLength(commitment, KZG_COMMITMENT_BYTES, 'KZG commitment');
  const digest = createHash('sha256').update(commitment).digest();
  digest[0] = VERSIONED_HASH_VERSION_KZG;
  return `0x${digest.toString('hex')}`;
}

/**
 * ethers v6 `KzgLibrary` for type-3 transactions, backed by c-kzg. Prefer passing a {@link BlobSidecar}
 * as the transaction's blob so ethers does not compute the commitment and proof a second time.
 */
export const kzg: KzgLibrary = {
  blobToKzgCommitment: (blob) => commitmentOf(blob),
  computeBlobKzgProof: (blob, commitment) => proofOf(blob, commitment),
};

/** A blob ready for a type-3 transaction: ethers' `BlobLike` shape plus its versioned hash. */
export interface BlobSidecar {
  readonly data: Uint8Array;
  readonly commitment: Uint8Array;
  readonly proof: Uint8Array;
  readonly versionedHash: string;
}

/** Encodes `payloads` into one blob ({@link encodeBlob}) and computes everything a blob transaction carries. */
export function blobSidecarOf(...payloads: Uint8Array[]): BlobSidecar {
  return sidecarOfBlob(encodeBlob(...payloads));
}

/** Everything a blob transaction carries for the 131,072-byte blob `data`, whatever it holds. */
export function sidecarOfBlob(data: Uint8Array): BlobSidecar {
  const commitment = commitmentOf(data);
  return { data, commitment, proof: proofOf(data, commitment), versionedHash: versionedHash(commitment) };
}
