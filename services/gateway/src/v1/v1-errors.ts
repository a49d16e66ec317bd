import { errorHeaders, v1ErrorBody, type V1ErrorBody } from '@svc/api';
import { AppError, appErrorFromRpc, isAppError, type Logger } from '@svc/platform';
import { isRpcError } from '@svc/proto';
import type { ErrorRequestHandler, RequestHandler } from 'express';
import { requestReadError } from '../http/api-errors.js';

/** Any failure of a `/v1` call as the catalogue error it is answered with. */
export function toV1Error(error: unknown): AppError {
  let appError: AppError;
  if (isAppError(error)) appError = error;
  else if (isRpcError(error)) appError = appErrorFromRpc(error);
  else appError = requestReadError(error) ?? new AppError('internal', { cause: error });
  if (appError.spec.v1Code !== undefined) return appError;
  // Before its first chunk a diverged stream is simply a failed job (the caller sends the call again).
  if (appError.code === 'stream_diverged')
    return new AppError('job_failed', { message: appError.message, cause: appError });
  // A code without a `/v1` spelling is a bug behind the route, not the caller's fault.
  return new AppError('internal', { cause: error });
}

/** A failure after a stream's first chunk as the error its error event names (job_failed, stream_diverged). */
export function toStreamError(error: unknown): AppError {
  const appError = isAppError(error) ? error : isRpcError(error) ? appErrorFromRpc(error) : undefined;
  if (appError?.spec.streamCode !== undefined) return appError;
  return toV1Error(error);
}

/** Answers errors in OpenAI's shape `{ error: { message, type, param, code } }`; a 500 hides its cause. */
export function v1ErrorHandler(logger: Logger): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    const v1Error = toV1Error(error);
    // A 500 is our bug; a 502/503 is a job or a dependency failing, which the caller is told to retry.
    if (v1Error.httpStatus === 500)
      logger.error({ err: error, method: req.method, path: req.path }, 'unexpected error on /v1');
    else if (v1Error.httpStatus > 500)
      logger.warn({ err: error, method: req.method, path: req.path }, `${v1Error.code} on /v1`);
    if (res.headersSent) {
      // A stream that failed after its first byte already ended with its error event; nothing more to say.
      if (!res.writableEnded) res.end();
      return;
    }
    res.status(v1Error.httpStatus).set(errorHeaders(v1Error)).json(v1ErrorBody(v1Error));
  };
}

/** Unknown `/v1` routes, answered like OpenAI does. */
export function v1RouteNotFound(): RequestHandler {
  return (req, res) => {
    const body: V1ErrorBody = {
      error: {
        message: `Invalid URL (${req.method} ${req.baseUrl}${req.path})`,
        type: 'invalid_request_error',
        param: null,
        code: null,
      },
    };
    res.status(404).json(body);
  };
}
