import {
  AppError,
  apiErrorBody,
  appErrorFromRpc,
  errorHeaders,
  isAppError,
  type Logger,
} from '@svc/platform';
import { isRpcError } from '@svc/proto';
import type { ErrorRequestHandler, RequestHandler } from 'express';

/** What express's body parser attaches to the errors it raises. */
interface BodyReadError {
  readonly type: string;
  readonly status: number;
  readonly expose?: boolean;
  readonly limit?: number;
}

function isBodyReadError(error: unknown): error is BodyReadError {
  if (typeof error !== 'object' || error === null) return false;
  const candidate = error as Partial<BodyReadError>;
  return (
    typeof candidate.type === 'string' &&
    typeof candidate.status === 'number' &&
    candidate.status >= 400 &&
    candidate.status < 500
  );
}

function bodyReadMessage(error: BodyReadError): string {
  switch (error.type) {
    case 'entity.parse.failed':
      return 'The body is not valid JSON.';
    case 'entity.too.large':
      return `The body is larger than ${error.limit ?? 'allowed'} bytes.`;
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return 'The body must be JSON in UTF-8.';
    default:
      return 'The body could not be read.';
  }
}

/** A body the parser refused (not JSON, too large, ...) as `invalid_request`; undefined for other errors. */
export function bodyReadError(error: unknown): AppError | undefined {
  if (!isBodyReadError(error)) return undefined;
  return new AppError('invalid_request', { message: bodyReadMessage(error), cause: error });
}

/** Any failure of an `/api` request as the catalogue error it is answered with. */
export function toApiError(error: unknown): AppError {
  let appError: AppError;
  if (isAppError(error)) appError = error;
  else if (isRpcError(error)) appError = appErrorFromRpc(error);
  else appError = bodyReadError(error) ?? new AppError('internal', { cause: error });
  // A code that has no `/api` spelling (a `/v1` error, say) is a bug behind the route, not the caller's fault.
  if (appError.spec.apiCode === undefined || appError.httpStatus >= 500)
    return new AppError('internal', { cause: error });
  return appError;
}

/** Answers errors as `{ error, message }`; a 500 says nothing of its cause, which goes to the log. */
export function apiErrorHandler(logger: Logger): ErrorRequestHandler {
  return (error: unknown, req, res, next) => {
    if (res.headersSent) {
      next(error);
      return;
    }
    const apiError = toApiError(error);
    if (apiError.httpStatus >= 500)
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
    res
      .status(404)
      .json({ error: 'not_found', message: `No route ${req.method} ${req.baseUrl}${req.path}.` });
  };
}
