import { createRequire } from 'node:module';
import type { KzgLibrary } from 'ethers';

interface CKzg {
  loadTrustedSetup(precompute: number, filePath?: string): void;
  blobToKzgCommitment(blob: Uint8Array): Uint8Array;
  computeBlobKzgProof(blob: Uint8Array, commitment: Uint8Array): Uint8Array;
}

let library: KzgLibrary | undefined;

/**
 * c-kzg with the mainnet trusted setup loaded, in the shape ethers takes for blob transactions.
 * The setup lives in the native module, which a process loads once (even when jest re-imports this
 * file per test file), so "already loaded" is success.
 */
export function loadKzg(): KzgLibrary {
  if (library) return library;
  const kzg = createRequire(import.meta.url)('c-kzg') as CKzg;
  try {
    kzg.loadTrustedSetup(0);
  } catch (error) {
    // Not `instanceof Error`: the addon's errors come from another realm under jest.
    if (!/already loaded/.test(String((error as { message?: unknown } | null)?.message))) throw error;
  }
  library = {
    blobToKzgCommitment: (blob) => kzg.blobToKzgCommitment(blob),
    computeBlobKzgProof: (blob, commitment) => kzg.computeBlobKzgProof(blob, commitment),
  };
  return library;
}
