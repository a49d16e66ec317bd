import { request } from './request.js';

/** An API key as `/api/api-keys` lists it (docs/api.md, API key resource). */
export interface ApiKey {
  readonly id: string;
  readonly prefix: string;
  readonly name: string;
  readonly spendCapWei: string | null;
  readonly spentWei: string;
  readonly limitHits: {
    readonly rate: number;
    readonly concurrency: number;
    readonly spendCap: number;
    readonly sessionOpens: number;
  };
  readonly createdAt: string;
  readonly revokedAt: string | null;
}

export interface MintedKey extends ApiKey {
  /** The full key, answered by the mint only. */
  readonly key: string;
}

export interface SignInToken {
  readonly token: string;
  readonly expiresAt: string;
  readonly address: string;
}

/** Where the service's money lives: `GET /api/chain`. */
export interface ServiceChain {
  readonly chainId: number;
  readonly jobRegistry: string;
  /** The service's signer, which wallets authorize; null on a server that runs no completions. */
  readonly delegate: string | null;
}

/** The `/api` routes of docs/api.md, called from the page's own origin. */
export const serviceApi = {
  challenge: (address: string) =>
    call<{ nonce: string; message: string }>(
      'GET',
      `/api/auth/challenge?address=${encodeURIComponent(address)}`,
    ),
  verify: (message: string, signature: string) =>
    call<SignInToken>('POST', '/api/auth/verify', { body: { message, signature } }),
  chain: () => call<ServiceChain>('GET', '/api/chain'),
  listKeys: (token: string) => call<ApiKey[]>('GET', '/api/api-keys', { token }),
  mintKey: (token: string, request: { name?: string; spendCapWei?: string | null }) =>
    call<MintedKey>('POST', '/api/api-keys', { token, body: request }),
  setCap: (token: string, id: string, spendCapWei: string | null) =>
    call<ApiKey>('PATCH', `/api/api-keys/${encodeURIComponent(id)}`, { token, body: { spendCapWei } }),
  revokeKey: (token: string, id: string) =>
    call<void>('POST', `/api/api-keys/${encodeURIComponent(id)}/revoke`, { token }),
  deleteKey: (token: string, id: string) =>
    call<void>('DELETE', `/api/api-keys/${encodeURIComponent(id)}`, { token }),
};

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
