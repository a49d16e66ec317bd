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
  const body = ((await response.json().catch(() => undefined)) ?? {}) as {
    error?: unknown;
    message?: unknown;
  };
  const retryAfter = Number(response.headers.get('retry-after'));
  const waited = Number.isFinite(retryAfter) && retryAfter > 0 ? { retry_after: retryAfter } : {};
  const fallback = `The service answered ${response.status}.`;
  if (typeof body.error === 'object' && body.error !== null) {
    // `/v1`: OpenAI's shape, with the service's extra fields (`accepts`, `spend_cap_wei`) inside `error`.
    const error = body.error as Record<string, unknown>;
    return new ServiceError(
      response.status,
      typeof error['code'] === 'string' ? error['code'] : null,
      typeof error['message'] === 'string' ? error['message'] : fallback,
      { ...error, ...waited },
    );
  }
  return new ServiceError(
    response.status,
    typeof body.error === 'string' ? body.error : null,
    typeof body.message === 'string' ? body.message : fallback,
    waited,
  );
}
