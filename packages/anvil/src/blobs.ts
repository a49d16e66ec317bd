import { randomBytes } from 'node:crypto';
import { hexlify, sha256, type Signer, type TransactionRequest, type TransactionResponse } from 'ethers';
import { loadKzg } from './kzg.js';
import { withGasHeadroom } from './dev-wallet.js';

export const BYTES_PER_BLOB = 131_072;
const BYTES_PER_FIELD_ELEMENT = 32;
const VERSIONED_HASH_VERSION_KZG = '0x01';
/** Generous ceiling: anvil's blob base fee starts at 1 wei. */
const MAX_FEE_PER_BLOB_GAS = 10n ** 10n;

/**
 * A valid blob of random content: every 32-byte field element starts with 0x00, which keeps it
 * below the BLS12-381 modulus. Distinct calls give distinct versioned hashes.
 */
export function randomBlob(): Uint8Array {
  const blob = new Uint8Array(randomBytes(BYTES_PER_BLOB));
  for (let offset = 0; offset < BYTES_PER_BLOB; offset += BYTES_PER_FIELD_ELEMENT) blob[offset] = 0;
  return blob;
}

export interface PreparedBlob {
  data: Uint8Array;
  commitment: string;
  proof: string;
  /** 0x01 ‖ sha256(commitment)[1:], what BLOBHASH returns for it. */
  versionedHash: string;
}

export function prepareBlob(data: Uint8Array): PreparedBlob {
  const kzg = loadKzg();
  const commitment = kzg.blobToKzgCommitment(data);
  const proof = kzg.computeBlobKzgProof(data, commitment);
  const versionedHash = VERSIONED_HASH_VERSION_KZG + sha256(commitment).slice(4);
  return { data, commitment: hexlify(commitment), proof: hexlify(proof), versionedHash };
}

/** Distinct random blobs reused round-robin: KZG proving costs ~120 ms a blob, reusing costs nothing. */
const POOL_SIZE = 6;
const pool: PreparedBlob[] = [];
let nextFromPool = 0;

function pooledBlob(): PreparedBlob {
  if (pool.length < POOL_SIZE) {
    const blob = prepareBlob(randomBlob());
    pool.push(blob);
    return blob;
  }
  const blob = pool[nextFromPool % POOL_SIZE] as PreparedBlob;
  nextFromPool += 1;
  return blob;
}

/**
 * Sends `request` with blobs attached: when a count is given, random ones from a small rotating
 * pool (so consecutive transactions carry different blobs). With none it is an
 * ordinary transaction. The gas is estimated with the blobs' versioned hashes in the simulated call
 * (ethers' own estimate leaves them out, so a contract reading BLOBHASH would see none), and a call
 * that would revert fails here with the revert data, before anything is signed or paid. The limit
 * gets the same headroom as DevWallet's (see there why).
 */
export async function sendWithBlobs(
  signer: Signer,
  request: TransactionRequest,
  blobs: number | readonly Uint8Array[],
): Promise<TransactionResponse> {
  const prepared =
    typeof blobs === 'number'
      ? Array.from({ length: blobs }, () => pooledBlob())
      : blobs.map((blob) => prepareBlob(blob));
  if (prepared.length === 0) return signer.sendTransaction(request);
  const blobRequest: TransactionRequest = {
    ...request,
    type: 3,
    maxFeePerBlobGas: request.maxFeePerBlobGas ?? MAX_FEE_PER_BLOB_GAS,
  };
  const provider = signer.provider;
  if (!provider) throw new Error('sendWithBlobs needs a signer connected to a provider');
  const gasLimit =
    request.gasLimit ??
    withGasHeadroom(
      await provider.estimateGas({
        ...blobRequest,
        from: request.from ?? (await signer.getAddress()),
        blobVersionedHashes: prepared.map((blob) => blob.versionedHash),
      }),
    );
  return signer.sendTransaction({
    ...blobRequest,
    gasLimit,
    blobs: prepared.map(({ data: blob, commitment, proof }) => ({ data: blob, commitment, proof })),
  });
}
