import { isHexString } from 'ethers';
import { BLOB_BYTES } from '../blob/codec.js';
import { versionedHash as versionedHashOf } from '../blob/kzg.js';
import { kzgThreads } from '../blob/kzg-thread.js';
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
 * hashes to `versionedHash`; undefined when none does. Anything that is not a blob is an error. The hex is
 * decoded natively and each commitment computed on a KZG thread: a blob is 256 KiB of hex and its
 * commitment up to 80 ms of CPU, which the event loop of a worker serving answers cannot spare.
 */
export async function findVerifiedBlob(
  versionedHash: string,
  candidates: unknown,
): Promise<Uint8Array | undefined> {
  if (!Array.isArray(candidates)) {
    throw new BlobVerificationError(versionedHash, 'beacon response `data` is not a list of blobs');
  }
  const wanted = versionedHash.toLowerCase();
  for (const candidate of candidates) {
    if (typeof candidate !== 'string' || !isHexString(candidate, BLOB_BYTES)) {
      throw new BlobVerificationError(versionedHash, 'beacon response holds something that is not a blob');
    }
    const blob = new Uint8Array(Buffer.from(candidate.slice(2), 'hex'));
    let commitment: Uint8Array;
    try {
      commitment = await kzgThreads.commitment(blob);
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
