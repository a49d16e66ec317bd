import { apiErrorBody, errorHeaders, type ApiErrorBody } from '@svc/api';
import { AppError, appErrorFromRpc, isAppError, type Logger } from '@svc/platform';
import { isRpcError } from '@svc/proto';
import type { ErrorRequestHandler, RequestHandler, Response } from 'express';

/**
 * An error the HTTP layer raised about the request itself, carrying a 4xx status: a body the parser refused
 * (`type` says why), a body that does not decompress as its Content-Encoding says (zlib's `errno`), a path
 * whose percent-encoding does not decode (a URIError from the router).
 */
interface RequestReadError {
  readonly type?: unknown;
  readonly limit?: unknown;
  readonly errno?: unknown;
}

function isRequestReadError(error: unknown): error is RequestReadError {
  if (typeof error !== 'object' || error === null || isAppError(error)) return false;
  const { status, statusCode } = error as { status?: unknown; statusCode?: unknown };
  const code = typeof status === 'number' ? status : statusCode;
  return typeof code === 'number' && code >= 400 && code < 500;
}

/** What was wrong, and the part of the request (`param` on `/v1`) it was wrong in. */
function requestReadProblem(error: RequestReadError): { message: string; param: string } {
  if (error instanceof URIError) return { message: 'The path is not valid percent-encoding.', param: 'path' };
  switch (error.type) {
    case 'entity.parse.failed':
      return { message: 'The body is not valid JSON.', param: 'body' };
    case 'entity.too.large':
      return { message: `The body is larger than ${String(error.limit ?? 'allowed')} bytes.`, param: 'body' };
    case 'encoding.unsupported':
      return {
        message: 'Content-Encoding must be gzip, deflate, br or identity.',
        param: 'content-encoding',
      };
    case 'charset.unsupported':
      return { message: 'The body must be JSON in UTF-8.', param: 'content-type' };
  }
  if (typeof error.errno === 'number')
    return { message: 'The body is not encoded as its Content-Encoding says.', param: 'content-encoding' };
  return { message: 'The request could not be read.', param: 'body' };
}

/**
 * Any error carrying a 4xx status (a body the parser refused, a body that does not decompress, a path that
 * does not decode) as `invalid_request`, the routes' documented 400; undefined for other errors. The
 * caller sent something malformed: it is never a server failure.
 */
export function requestReadError(error: unknown): AppError | undefined {
  if (!isRequestReadError(error)) return undefined;
  const { message, param } = requestReadProblem(error);
  return new AppError('invalid_request', { message, fields: { param }, cause: error });
}

/** Any failure of an `/api` request as the catalogue error it is answered with. */
export function toApiError(error: unknown): AppError {
  let appError: AppError;
  if (isAppError(error)) appError = error;
  else if (isRpcError(error)) appError = appErrorFromRpc(error);
  else appError = requestReadError(error) ?? new AppError('internal', { cause: error });
  // A code that has no `/api` spelling (a `/v1` error, say) is a bug behind the route, not the caller's
  // fault; a 500 is answered with the catalogue's words, never the message of what failed.
  if (appError.spec.apiCode === undefined || appError.code === 'internal')
    return new AppError('internal', { cause: error });
  return appError;
}

/**
 * Answers errors as `{ error, message }`; a 500 says nothing of its cause, which goes to the log. A 503
 * `not_configured` is how the server is set up, not a failure: it is not logged.
 */
export function apiErrorHandler(logger: Logger): ErrorRequestHandler {
  return (error: unknown, req, res, next) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const apiError = toApiError(error);
    if (apiError.code === 'internal')
      logger.error({ err: error, method: req.method, path: req.path }, 'unexpected error on /api');
    res.status(apiError.httpStatus).set(errorHeaders(apiError)).json(apiErrorBody(apiError));
  };
}

/**
 * Unknown `/api` routes answer JSON like every other `/api` error. `not_found` is not a catalogue error: it
 * names no resource, only a path the API does not have.
 */
export function apiRouteNotFound(): RequestHandler {
  return (req, res) => {
    answerNotFound(res, `No route ${req.method} ${req.baseUrl}${req.path}.`);
  };
}

/** A 404 `not_found` in the `/api` shape: a path the server does not serve here, never a resource. */
export function answerNotFound(res: Response, message: string): void {
  const body: ApiErrorBody = { error: 'not_found', message };
  res.status(404).json(body);
}
