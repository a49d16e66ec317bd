import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { Transaction, getBytes, hexlify } from 'ethers';
import {
  BLOB_BYTES,
  KZG_COMMITMENT_BYTES,
  KZG_PROOF_BYTES,
  MalformedBlobError,
  blobSidecarOf,
  commitmentOf,
  encodeBlob,
  kzg,
  loadKzgTrustedSetup,
  proofOf,
  verifyBlobProof,
  versionedHash,
} from '../src/index.js';
import { expectSameBytes } from './support/bytes.js';

// The well-known versioned hash of the all-zero blob (commitment = the G1 identity, 0xc0 ‖ 47 zeros).
const ZERO_BLOB_VERSIONED_HASH = '0x010657f37554c781402a22917dee2f75def7ab966d7b770905398eba3c444014';

const payload = new TextEncoder().encode('a prompt wire stands in here');

describe('KZG', () => {
  beforeAll(() => {
    loadKzgTrustedSetup();
    loadKzgTrustedSetup(); // idempotent
  });

  it('commits to a blob with a proof that verifies', () => {
    const blob = encodeBlob(payload);
    const commitment = commitmentOf(blob);
    const proof = proofOf(blob, commitment);
    expect(commitment.length).toBe(KZG_COMMITMENT_BYTES);
    expect(proof.length).toBe(KZG_PROOF_BYTES);
    expect(verifyBlobProof(blob, commitment, proof)).toBe(true);
  });

  it('rejects a proof for another blob, and garbage inputs, with false', () => {
    const blob = encodeBlob(payload);
    const commitment = commitmentOf(blob);
    const proof = proofOf(blob, commitment);
    const other = encodeBlob(new Uint8Array([1]));
    expect(verifyBlobProof(other, commitment, proof)).toBe(false);
    expect(verifyBlobProof(blob, commitmentOf(other), proof)).toBe(false);
    expect(verifyBlobProof(blob, commitment, new Uint8Array(KZG_PROOF_BYTES).fill(0xab))).toBe(false);
    expect(verifyBlobProof(blob, commitment, proof.subarray(1))).toBe(false);
    expect(verifyBlobProof(blob.subarray(1), commitment, proof)).toBe(false);
  });

  it('derives the versioned hash as 0x01 ‖ sha256(commitment)[1:]', () => {
    const commitment = commitmentOf(encodeBlob(payload));
    const hash = versionedHash(commitment);
    const digest = createHash('sha256').update(commitment).digest();
    expect(hash).toMatch(/^0x01[0-9a-f]{62}$/);
    expect(hash.slice(4)).toBe(digest.subarray(1).toString('hex'));
  });

  it('gives the known versioned hash for the all-zero blob', () => {
    const zeroBlob = new Uint8Array(BLOB_BYTES);
    expect(hexlify(commitmentOf(zeroBlob))).toBe(`0xc0${'00'.repeat(47)}`);
    expect(versionedHash(commitmentOf(zeroBlob))).toBe(ZERO_BLOB_VERSIONED_HASH);
    // The all-zero blob carries no payload (a zero length ends the frame list): the codec never makes it.
    expect(() => blobSidecarOf(new Uint8Array(0))).toThrow(RangeError);
  });

  it('refuses blobs of the wrong size and non-canonical field elements with MalformedBlobError', () => {
    expect(() => commitmentOf(new Uint8Array(BLOB_BYTES - 1))).toThrow(MalformedBlobError);
    const aboveModulus = new Uint8Array(BLOB_BYTES).fill(0xff);
    expect(() => commitmentOf(aboveModulus)).toThrow(MalformedBlobError);
    expect(() => versionedHash(new Uint8Array(47))).toThrow(RangeError);
  });

  it('gives ethers the same commitment, proof and versioned hash for a type-3 transaction', () => {
    const sidecar = blobSidecarOf(payload);
    expect(verifyBlobProof(sidecar.data, sidecar.commitment, sidecar.proof)).toBe(true);

    const computedByEthers = new Transaction();
    computedByEthers.type = 3;
    computedByEthers.kzg = kzg;
    computedByEthers.blobs = [sidecar.data];
    expect(computedByEthers.blobVersionedHashes).toEqual([sidecar.versionedHash]);
    const [blob] = computedByEthers.blobs ?? [];
    expect(blob?.commitment).toBe(hexlify(sidecar.commitment));
    expect(blob?.proof).toBe(hexlify(sidecar.proof));

    const precomputed = new Transaction();
    precomputed.type = 3;
    precomputed.blobs = [sidecar];
    expect(precomputed.blobVersionedHashes).toEqual([sidecar.versionedHash]);
    expectSameBytes(getBytes(precomputed.blobs?.[0]?.data ?? '0x'), sidecar.data);
  });
});
