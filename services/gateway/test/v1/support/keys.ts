import type { HDNodeWallet } from 'ethers';
import type { ApiKeyJson } from '@svc/api';
import { call, randomWallet, signInOverHttp } from '../../support/http.js';

export interface MintedKey {
  readonly key: string;
  readonly id: string;
  /** The owning wallet's sign-in token, to manage the key over `/api`. */
  readonly token: string;
  /** The owning wallet, which pays the key's calls (and may sign per-call payments beside it). */
  readonly wallet: HDNodeWallet;
}

/** Signs a fresh wallet in over `/api` and mints one key for it. */
export async function mintKey(baseUrl: string, body: { spendCapWei?: string } = {}): Promise<MintedKey> {
  const wallet = randomWallet();
  const { token } = await signInOverHttp(baseUrl, wallet);
  const minted = await call(baseUrl, 'POST', '/api/api-keys', { token, body });
  if (minted.status !== 201) throw new Error(`mint answered ${minted.status}: ${minted.text}`);
  const { key, id } = minted.body as { key: string; id: string };
  return { key, id, token, wallet };
}

export async function listedKey(baseUrl: string, minted: MintedKey): Promise<ApiKeyJson> {
  const listed = await call(baseUrl, 'GET', '/api/api-keys', { token: minted.token });
  const key = (listed.body as ApiKeyJson[]).find((candidate) => candidate.id === minted.id);
  if (key === undefined) throw new Error(`key ${minted.id} is not listed`);
  return key;
}
