import { EXIT, CliError, apiError } from './errors.js';

/** A key as `/api/api-keys` lists it (docs/api.md, API key resource). */
export interface ApiKey {
  readonly id: string;
  readonly prefix: string;
  readonly name: string;
  readonly spendCapWei: string | null;
  readonly spentWei: string;
  readonly limitHits: { rate: number; concurrency: number; spendCap: number; sessionOpens: number };
  readonly createdAt: string;
  readonly revokedAt: string | null;
}

/** The sign-in and key routes (`/api`); every refusal becomes a CliError with the API's code and remedy. */
export class ApiClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token?: string,
  ) {}

  challenge(address: string): Promise<{ nonce: string; message: string }> {
    return this.call('GET', `/api/auth/challenge?address=${encodeURIComponent(address)}`);
  }

  verify(message: string, signature: string): Promise<{ token: string; expiresAt: string; address: string }> {
    return this.call('POST', '/api/auth/verify', { message, signature });
  }

  listKeys(): Promise<ApiKey[]> {
    return this.call('GET', '/api/api-keys');
  }

  createKey(body: { name?: string; spendCapWei?: string | null }): Promise<ApiKey & { key: string }> {
    return this.call('POST', '/api/api-keys', body);
  }

  setCap(id: string, spendCapWei: string | null): Promise<ApiKey> {
    return this.call('PATCH', `/api/api-keys/${encodeURIComponent(id)}`, { spendCapWei });
  }

  revokeKey(id: string): Promise<void> {
    return this.call('POST', `/api/api-keys/${encodeURIComponent(id)}/revoke`);
  }

  deleteKey(id: string): Promise<void> {
    return this.call('DELETE', `/api/api-keys/${encodeURIComponent(id)}`);
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: {
          ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (error) {
      throw unreachable(this.baseUrl, error);
    }
    const text = await response.text();
    const parsed: unknown = text ? safeJson(text) : undefined;
    if (!response.ok) throw apiError(response.status, parsed, response.headers.get('retry-after'));
    return parsed as T;
  }
}

/** The service could not be reached at all. */
export function unreachable(baseUrl: string, error: unknown): CliError {
  const reason = (error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message;
  return new CliError(`cannot reach ${baseUrl} (${reason})`, EXIT.failed, {
    remedy: 'Check the base URL (--base-url, SVC_BASE_URL) and that the service runs (npm start)',
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
