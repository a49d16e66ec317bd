import { Metadata, status as GrpcStatus } from '@grpc/grpc-js';

export { GrpcStatus };

/** Metadata keys the adapter uses on every call; lower case as HTTP/2 requires. */
export const METADATA = {
  requestId: 'x-request-id',
  /** The caller's credentials: `Bearer <service token>` on calls between the services. */
  authorization: 'authorization',
  /** The machine-readable application error code (the API error catalogue's internal name). */
  errorCode: 'x-error-code',
  /** JSON details of an error (for example the `accepts` of a 402), binary so any UTF-8 survives. */
  errorDetails: 'x-error-details-bin',
} as const;

export type ErrorDetails = Record<string, unknown>;

/**
 * An error that crosses a gRPC boundary: a gRPC status for transport-level meaning, plus an optional
 * application code and details so the far side can rebuild the exact domain error without parsing text.
 */
export class RpcError extends Error {
  override readonly name = 'RpcError';

  constructor(
    readonly status: GrpcStatus,
    message: string,
    readonly appCode?: string,
    readonly details?: ErrorDetails,
  ) {
    super(message);
  }

  /** Metadata that carries `appCode` and `details` on the wire. */
  toMetadata(): Metadata {
    const metadata = new Metadata();
    if (this.appCode) metadata.set(METADATA.errorCode, this.appCode);
    if (this.details) metadata.set(METADATA.errorDetails, Buffer.from(JSON.stringify(this.details), 'utf8'));
    return metadata;
  }

  /** Rebuilds an RpcError from what @grpc/grpc-js reports for a failed call. */
  static fromServiceError(error: {
    code?: number;
    details?: string;
    message?: string;
    metadata?: Metadata;
  }): RpcError {
    const status = typeof error.code === 'number' ? (error.code as GrpcStatus) : GrpcStatus.UNKNOWN;
    const appCode = error.metadata?.get(METADATA.errorCode)[0];
    const rawDetails = error.metadata?.get(METADATA.errorDetails)[0];
    let details: ErrorDetails | undefined;
    if (rawDetails !== undefined) {
      try {
        details = JSON.parse(
          Buffer.isBuffer(rawDetails) ? rawDetails.toString('utf8') : rawDetails,
        ) as ErrorDetails;
      } catch {
        details = undefined;
      }
    }
    return new RpcError(
      status,
      error.details ?? error.message ?? 'unknown error',
      typeof appCode === 'string' ? appCode : undefined,
      details,
    );
  }
}

export function isRpcError(error: unknown): error is RpcError {
  return error instanceof RpcError;
}
