import { findVerifiedBlob, requireVersionedHash } from './blob-source.js';
import { beaconData, getBeaconJson, type BeaconHttpOptions } from './beacon-http.js';
import { BlobNotFoundError, BlobVerificationError } from './errors.js';

/**
 * `GET /eth/v1/beacon/blobs/{blockId}?versioned_hashes=…`, verified: the blob is chosen by its
 * recomputed versioned hash, whatever the server claims. An empty answer means not found.
 */
export async function fetchBlobFromBlobsEndpoint(
  http: BeaconHttpOptions,
  blockId: string,
  versionedHash: string,
): Promise<Uint8Array> {
  const hash = requireVersionedHash(versionedHash);
  const path = `eth/v1/beacon/blobs/${encodeURIComponent(blockId)}?versioned_hashes=${hash}`;
  const body = await getBeaconJson(http, path);
  if (body === null) throw new BlobNotFoundError(hash, blockId);
  const served = beaconData(body, path);
  const blob = await findVerifiedBlob(hash, served);
  if (blob) return blob;
  // Asked for one hash, the server answered with blobs that are not it: never pass them on.
  if (Array.isArray(served) && served.length > 0) {
    throw new BlobVerificationError(
      hash,
      `blob source served ${served.length} blob(s), none with hash ${hash}`,
    );
  }
  throw new BlobNotFoundError(hash, blockId);
}
