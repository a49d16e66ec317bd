import type { AppError } from './app-error.js';

/** OpenAI-shaped body of a `/v1` error: `{ error: { message, type, param, code, ...fields } }`. */
export function v1ErrorBody(error: AppError): { error: Record<string, unknown> } {
  const code = error.spec.v1Code === undefined ? null : error.spec.v1Code;
  return {
    error: { message: error.message, type: error.spec.openaiType, param: null, code, ...error.fields },
  };
}

/** Body of an `/api` error: `{ error: "<code>", message: "<text>" }`. */
export function apiErrorBody(error: AppError): { error: string; message: string } {
  return { error: error.spec.apiCode ?? 'internal_error', message: error.message };
}

/** Payload of the SSE error event that ends a stream after its first chunk. */
export function streamErrorEvent(error: AppError): {
  error: { message: string; type: string; code: string };
} {
  return {
    error: {
      message: error.message,
      type: error.spec.openaiType,
      code: error.spec.streamCode ?? 'job_failed',
    },
  };
}

/** Response headers of an error: `retry-after` on a 429 plus any the error carries. */
export function errorHeaders(error: AppError): Record<string, string> {
  const headers: Record<string, string> = { ...error.headers };
  if (error.retryAfterSeconds !== undefined)
    headers['retry-after'] = String(Math.max(1, Math.ceil(error.retryAfterSeconds)));
  return headers;
}
