import { BeaconApiError } from './errors.js';

export interface BeaconHttpOptions {
  /** Base URL of the beacon API (for anvil: its RPC URL). */
  readonly baseUrl: string;
  /** Per request; default 10 s. */
  readonly timeoutMs?: number;
  /** Extra headers, e.g. an API key of a hosted beacon node. */
  readonly headers?: Record<string, string>;
}

/** A GET of the beacon API: the parsed JSON body, or null on 404; other statuses are BeaconApiError. */
export async function getBeaconJson(options: BeaconHttpOptions, path: string): Promise<unknown> {
  const url = new URL(
    path,
    options.baseUrl.endsWith('/') ? options.baseUrl : `${options.baseUrl}/`,
  ).toString();
  let response: Response;
  try {
    response = await fetch(url, {
      headers: { accept: 'application/json', ...options.headers },
      signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
    });
  } catch (error) {
    throw new BeaconApiError(url, undefined, `beacon API request failed: ${url}`, { cause: error });
  }
  if (response.status === 404) {
    await response.body?.cancel();
    return null;
  }
  if (!response.ok) {
    const text = await response.text().catch(() => '');
    throw new BeaconApiError(
      url,
      response.status,
      `beacon API answered ${response.status}: ${text.slice(0, 200)}`,
    );
  }
  try {
    return await response.json();
  } catch (error) {
    throw new BeaconApiError(url, response.status, 'beacon API answered with a body that is not JSON', {
      cause: error,
    });
  }
}

/** `data` of a beacon API envelope `{ data: … }`. */
export function beaconData(body: unknown, url: string): unknown {
  if (typeof body !== 'object' || body === null || !('data' in body)) {
    throw new BeaconApiError(url, 200, `beacon API answered without \`data\`: ${url}`);
  }
  return (body as { data: unknown }).data;
}
