import { errorOfBody } from '@svc/api';
import { ServiceError, unreachable } from './api-error.js';

/**
 * One call to the service from the page's own origin: the bearer credential (a sign-in token on `/api`,
 * an API key on `/v1`), a JSON body, and an error status turned into a ServiceError with the code, message
 * and extra fields of either error shape (`/api`: `{ error, message }`; `/v1`: `{ error: { code, message,
 * … } }`) and the `retry-after` header. Aborting `signal` rejects with its AbortError, untouched.
 */
export async function request(
  method: string,
  path: string,
  options: { bearer?: string; body?: unknown; signal?: AbortSignal } = {},
): Promise<Response> {
  const headers: Record<string, string> = {};
  if (options.bearer) headers['authorization'] = `Bearer ${options.bearer}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers,
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      cache: 'no-store',
    });
  } catch (error) {
    if (options.signal?.aborted) throw error;
    throw unreachable(error);
  }
  if (response.ok) return response;
  throw await serviceErrorOf(response);
}

async function serviceErrorOf(response: Response): Promise<ServiceError> {
  const body: unknown = await response.json().catch(() => undefined);
  const retryAfter = Number(response.headers.get('retry-after'));
  const waited = Number.isFinite(retryAfter) && retryAfter > 0 ? { retry_after: retryAfter } : {};
  const fallback = `The service answered ${response.status}.`;
  // `/v1`: OpenAI's shape, with the service's extra fields (`accepts`, `spend_cap_wei`) inside `error`.
  const error = errorOfBody(body);
  if (error)
    return new ServiceError(response.status, error.code, error.message ?? fallback, {
      ...error.fields,
      ...waited,
    });
  const message = (body as { message?: unknown } | undefined)?.message;
  return new ServiceError(response.status, null, typeof message === 'string' ? message : fallback, waited);
}
