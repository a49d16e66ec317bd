import { getBytes, isHexString } from 'ethers';
import { BLOB_BYTES } from '../blob/codec.js';
import { commitmentOf, versionedHash as versionedHashOf } from '../blob/kzg.js';
import { BlobVerificationError } from './errors.js';

export interface BlobLocation {
  /** Execution block that included the blob-carrying transaction. */
  readonly blockNumber: number;
}

/** Where workers read prompt blobs (docs/protocol.md, Blob format). */
export interface BlobSource {
  /**
   * The blob with `versionedHash`, verified: its KZG commitment hashes to `versionedHash`.
   * Throws BlobNotFoundError when the source does not hold it, BlobVerificationError when what it
   * served does not match, BeaconApiError when the source cannot be asked.
   */
  fetchBlob(versionedHash: string, location: BlobLocation): Promise<Uint8Array>;
}

/**
 * Picks the blob among `candidates` (hex strings of a beacon `blobs` response) whose commitment
 * hashes to `versionedHash`; undefined when none does. Anything that is not a blob is an error.
 */
export function findVerifiedBlob(versionedHash: string, candidates: unknown): Uint8Array | undefined {
  if (!Array.isArray(candidates)) {
    throw new BlobVerificationError(versionedHash, 'beacon response `data` is not a list of blobs');
  }
  const wanted = versionedHash.toLowerCase();
  for (const candidate of candidates) {
    if (typeof candidate !== 'string' || !isHexString(candidate, BLOB_BYTES)) {
      throw new BlobVerificationError(versionedHash, 'beacon response holds something that is not a blob');
    }
    const blob = getBytes(candidate);
    let commitment: Uint8Array;
    try {
      commitment = commitmentOf(blob);
    } catch (error) {
      throw new BlobVerificationError(versionedHash, 'beacon response holds a non-canonical blob', {
        cause: error,
      });
    }
    if (versionedHashOf(commitment) === wanted) return blob;
  }
  return undefined;
}

export function requireVersionedHash(versionedHash: string): string {
  if (!isHexString(versionedHash, 32) || !versionedHash.toLowerCase().startsWith('0x01')) {
    throw new RangeError(`not a KZG versioned hash: ${versionedHash}`);
  }
  return versionedHash.toLowerCase();
}
