/** The blob is not served by the source: pruned, not yet available, or never in that block. */
export class BlobNotFoundError extends Error {
  readonly reason = 'blob_not_found' as const;

  constructor(
    readonly versionedHash: string,
    readonly blockId: string,
  ) {
    super(`blob ${versionedHash} not found at block ${blockId}`);
    this.name = 'BlobNotFoundError';
  }
}

/**
 * A source answered with bytes that do not commit to the requested versioned hash (or with a body
 * that is not a beacon blobs response). Blobs are checked, never trusted.
 */
export class BlobVerificationError extends Error {
  readonly reason = 'blob_verification_failed' as const;

  constructor(
    readonly versionedHash: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'BlobVerificationError';
  }
}

/** The beacon API could not be reached or answered with an unexpected status. */
export class BeaconApiError extends Error {
  readonly reason = 'beacon_api_failed' as const;

  constructor(
    readonly url: string,
    readonly status: number | undefined,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'BeaconApiError';
  }
}
