import { API_ERRORS, isApiErrorName, type ApiErrorName, type ApiErrorSpec } from '@svc/api';
import { RpcError } from '@svc/proto';
import { GRPC_STATUS_OF_ERROR } from './grpc-status.js';

/** Extra public fields of an error, e.g. `spend_cap_wei` or `accepts`; they appear inside `error` on `/v1`. */
export type ErrorFields = Record<string, unknown>;

export interface AppErrorOptions {
  message?: string;
  fields?: ErrorFields;
  /** Seconds the caller should wait (429s: the `retry-after` header). */
  retryAfterSeconds?: number;
  /** Response headers that belong to the error, e.g. PAYMENT-REQUIRED on a payment 402. */
  headers?: Record<string, string>;
  cause?: unknown;
}

/**
 * A domain error from the catalogue (`@svc/api`). Internal code throws these; only the edge turns them into
 * HTTP, SSE (the catalogue's bodies, `@svc/api`) or gRPC (here).
 */
export class AppError extends Error {
  override readonly name = 'AppError';
  readonly spec: ApiErrorSpec;
  readonly fields: ErrorFields;
  readonly retryAfterSeconds: number | undefined;
  readonly headers: Record<string, string>;

  constructor(
    readonly code: ApiErrorName,
    options: AppErrorOptions = {},
  ) {
    super(
      options.message ?? API_ERRORS[code].message,
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.spec = API_ERRORS[code];
    this.fields = options.fields ?? {};
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.headers = options.headers ?? {};
  }

  get httpStatus(): number {
    return this.spec.httpStatus;
  }
}

export function isAppError(error: unknown): error is AppError {
  return error instanceof AppError;
}

interface WireDetails {
  fields?: ErrorFields;
  retryAfterSeconds?: number;
  headers?: Record<string, string>;
}

/** The gRPC form of an AppError: its status, its name as the application code, its fields as details. */
export function appErrorToRpc(error: AppError): RpcError {
  const details: WireDetails = {};
  if (Object.keys(error.fields).length > 0) details.fields = error.fields;
  if (error.retryAfterSeconds !== undefined) details.retryAfterSeconds = error.retryAfterSeconds;
  if (Object.keys(error.headers).length > 0) details.headers = error.headers;
  return new RpcError(
    GRPC_STATUS_OF_ERROR[error.code],
    error.message,
    error.code,
    Object.keys(details).length ? { ...details } : undefined,
  );
}

/** Rebuilds the AppError a server threw; anything else (transport failures, unknown codes) becomes `internal`. */
export function appErrorFromRpc(error: unknown): AppError {
  if (error instanceof RpcError && isApiErrorName(error.appCode)) {
    const details = (error.details ?? {}) as WireDetails;
    return new AppError(error.appCode, {
      message: error.message,
      fields: details.fields,
      retryAfterSeconds: details.retryAfterSeconds,
      headers: details.headers,
      cause: error,
    });
  }
  return new AppError('internal', { cause: error });
}

/** `mapError` for GrpcServer: AppErrors keep their code across the boundary. */
export function mapAppErrorToRpc(error: unknown): RpcError | undefined {
  return error instanceof AppError ? appErrorToRpc(error) : undefined;
}
