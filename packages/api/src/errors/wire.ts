import { API_ERRORS, type ApiErrorName, type ApiErrorSpec } from './catalogue.js';
import { isRecord } from '../json-record.js';

/**
 * A catalogue error as the edge answers it: its name, its message, and its extra public fields
 * (`spend_cap_wei`, `accepts`). `@svc/platform`'s AppError is one.
 */
export interface CatalogueError {
  readonly code: ApiErrorName;
  readonly message: string;
  /** Extra public fields; on `/v1` they appear inside `error`. */
  readonly fields?: Readonly<Record<string, unknown>>;
  /** Seconds the caller should wait (429s: the `retry-after` header). */
  readonly retryAfterSeconds?: number | undefined;
  /** Response headers that belong to the error, e.g. PAYMENT-REQUIRED on a payment 402. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** A `/v1` error body, OpenAI's shape: branch on `error.code` (null for a plain bad request or a 500). */
export interface V1ErrorBody {
  readonly error: {
    readonly message: string;
    /** OpenAI's error type, e.g. `invalid_request_error`. */
    readonly type: string;
    /** The request field at fault (a bad request), else null. */
    readonly param: string | null;
    readonly code: string | null;
    /** `accepts` on a payable 402, `spend_cap_wei` on `spend_cap_exceeded`. */
    readonly [field: string]: unknown;
  };
}

/** An `/api` error body: `{ error: "<code>", message: "<text>" }` (not OpenAI's shape). */
export interface ApiErrorBody {
  readonly error: string;
  readonly message: string;
}

/** The SSE error event that ends a stream after its first chunk, in place of `[DONE]`. */
export interface StreamErrorEvent {
  readonly error: { readonly message: string; readonly type: string; readonly code: string };
}

/** OpenAI-shaped body of a `/v1` error: `{ error: { message, type, param, code, ...fields } }`. */
export function v1ErrorBody(error: CatalogueError): V1ErrorBody {
  const spec: ApiErrorSpec = API_ERRORS[error.code];
  const code = spec.v1Code === undefined ? null : spec.v1Code;
  return {
    error: { message: error.message, type: spec.openaiType, param: null, code, ...error.fields },
  };
}

/** Body of an `/api` error: `{ error: "<code>", message: "<text>" }`. */
export function apiErrorBody(error: CatalogueError): ApiErrorBody {
  const spec: ApiErrorSpec = API_ERRORS[error.code];
  return { error: spec.apiCode ?? 'internal_error', message: error.message };
}

/** Payload of the SSE error event that ends a stream after its first chunk. */
export function streamErrorEvent(error: CatalogueError): StreamErrorEvent {
  const spec: ApiErrorSpec = API_ERRORS[error.code];
  return { error: { message: error.message, type: spec.openaiType, code: spec.streamCode ?? 'job_failed' } };
}

/** Response headers of an error: `retry-after` on a 429 plus any the error carries. */
export function errorHeaders(error: CatalogueError): Record<string, string> {
  const headers: Record<string, string> = { ...error.headers };
  if (error.retryAfterSeconds !== undefined)
    headers['retry-after'] = String(Math.max(1, Math.ceil(error.retryAfterSeconds)));
  return headers;
}

/** The error an answer's body carries, as a client reads it. */
export interface ErrorOfBody {
  /** `/v1`'s `error.code`, `/api`'s `error`; null when there is none. */
  readonly code: string | null;
  readonly message?: string;
  /** `/v1`'s extra fields (`accepts`, `spend_cap_wei`): the `error` object but its message, type, param, code. */
  readonly fields: Readonly<Record<string, unknown>>;
}

/**
 * The error in an answer's body, in either shape: `/v1`'s `{ error: { message, type, param, code, … } }` or
 * `/api`'s `{ error: "<code>", message }`. Undefined when the body has neither (not JSON, a proxy's page).
 */
export function errorOfBody(body: unknown): ErrorOfBody | undefined {
  if (!isRecord(body)) return undefined;
  const { error } = body;
  if (isRecord(error)) {
    const { message, code, type: _type, param: _param, ...fields } = error;
    return {
      code: typeof code === 'string' ? code : null,
      ...(typeof message === 'string' ? { message } : {}),
      fields,
    };
  }
  if (typeof error === 'string')
    return {
      code: error,
      ...(typeof body.message === 'string' ? { message: body.message } : {}),
      fields: {},
    };
  return undefined;
}
