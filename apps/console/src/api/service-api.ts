import type {
  ApiKeyJson,
  ChainJson,
  MintedApiKeyJson,
  MintKeyRequestJson,
  SignInChallengeJson,
  SignInResultJson,
  UsageListJson,
} from '@svc/api';
import { request } from './request.js';

/** The `/api` routes of docs/api.md, called from the page's own origin. */
export const serviceApi = {
  challenge: (address: string) =>
    call<SignInChallengeJson>('GET', `/api/auth/challenge?address=${encodeURIComponent(address)}`),
  verify: (message: string, signature: string) =>
    call<SignInResultJson>('POST', '/api/auth/verify', { body: { message, signature } }),
  chain: () => call<ChainJson>('GET', '/api/chain'),
  listKeys: (token: string) => call<ApiKeyJson[]>('GET', '/api/api-keys', { token }),
  mintKey: (token: string, request: MintKeyRequestJson) =>
    call<MintedApiKeyJson>('POST', '/api/api-keys', { token, body: request }),
  setCap: (token: string, id: string, spendCapWei: string | null) =>
    call<ApiKeyJson>('PATCH', `/api/api-keys/${encodeURIComponent(id)}`, { token, body: { spendCapWei } }),
  revokeKey: (token: string, id: string) =>
    call<void>('POST', `/api/api-keys/${encodeURIComponent(id)}/revoke`, { token }),
  deleteKey: (token: string, id: string) =>
    call<void>('DELETE', `/api/api-keys/${encodeURIComponent(id)}`, { token }),
  usage: (token: string, query: UsageQuery = {}) =>
    call<UsageListJson>('GET', `/api/usage${usageSearch(query)}`, { token }),
};

/** The query of `GET /api/usage` (docs/api.md, Usage). */
export interface UsageQuery {
  readonly from?: string;
  readonly to?: string;
  readonly key?: string;
  readonly cursor?: string;
  readonly limit?: number;
}

function usageSearch(query: UsageQuery): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query))
    if (value !== undefined && value !== '') params.set(name, String(value));
  const search = params.toString();
  return search ? `?${search}` : '';
}

async function call<T>(
  method: string,
  path: string,
  options: { token?: string; body?: unknown } = {},
): Promise<T> {
  const response = await request(method, path, {
    ...(options.token ? { bearer: options.token } : {}),
    ...(options.body !== undefined ? { body: options.body } : {}),
  });
  if (response.status === 204) return undefined as T;
  return (await response.json()) as T;
}
