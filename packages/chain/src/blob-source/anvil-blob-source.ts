import type { BlobLocation, BlobSource } from './blob-source.js';
import type { BeaconHttpOptions } from './beacon-http.js';
import { fetchBlobFromBlobsEndpoint } from './blobs-endpoint.js';

/**
 * anvil serves the beacon blobs endpoint on its RPC port and takes the execution block number as
 * the block id.
 */
export class AnvilBlobSource implements BlobSource {
  readonly #http: BeaconHttpOptions;

  constructor(options: { rpcUrl: string; timeoutMs?: number }) {
    this.#http = { baseUrl: options.rpcUrl, ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}) };
  }

  fetchBlob(versionedHash: string, location: BlobLocation): Promise<Uint8Array> {
    return fetchBlobFromBlobsEndpoint(this.#http, String(location.blockNumber), versionedHash);
  }
}
