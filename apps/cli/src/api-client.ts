import type {
  ApiKeyJson,
  MintedApiKeyJson,
  MintKeyRequestJson,
  SignInChallengeJson,
  SignInResultJson,
  UsageListJson,
} from '@svc/api';
import { EXIT, CliError, apiError } from './errors.js';

/** The sign-in and key routes (`/api`); every refusal becomes a CliError with the API's code and remedy. */
export class ApiClient {
  constructor(
    private readonly baseUrl: string,
    private readonly token?: string,
  ) {}

  challenge(address: string): Promise<SignInChallengeJson> {
    return this.call('GET', `/api/auth/challenge?address=${encodeURIComponent(address)}`);
  }

  verify(message: string, signature: string): Promise<SignInResultJson> {
    return this.call('POST', '/api/auth/verify', { message, signature });
  }

  listKeys(): Promise<ApiKeyJson[]> {
    return this.call('GET', '/api/api-keys');
  }

  createKey(body: MintKeyRequestJson): Promise<MintedApiKeyJson> {
    return this.call('POST', '/api/api-keys', body);
  }

  setCap(id: string, spendCapWei: string | null): Promise<ApiKeyJson> {
    return this.call('PATCH', `/api/api-keys/${encodeURIComponent(id)}`, { spendCapWei });
  }

  revokeKey(id: string): Promise<void> {
    return this.call('POST', `/api/api-keys/${encodeURIComponent(id)}/revoke`);
  }

  deleteKey(id: string): Promise<void> {
    return this.call('DELETE', `/api/api-keys/${encodeURIComponent(id)}`);
  }

  /** One page of `GET /api/usage` (docs/api.md, Usage); parameters left undefined are not sent. */
  usage(query: UsageQuery = {}): Promise<UsageListJson> {
    const params = new URLSearchParams();
    for (const [name, value] of Object.entries(query))
      if (value !== undefined) params.set(name, String(value));
    const search = params.toString();
    return this.call('GET', `/api/usage${search ? `?${search}` : ''}`);
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

/** The query of `GET /api/usage`. */
export interface UsageQuery {
  readonly from?: string;
  readonly to?: string;
  readonly key?: string;
  readonly cursor?: string;
  readonly limit?: number;
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
