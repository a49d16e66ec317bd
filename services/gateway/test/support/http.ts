import { Wallet, type HDNodeWallet } from 'ethers';

export interface CallOptions {
  readonly token?: string;
  /** Sent as JSON. */
  readonly body?: unknown;
  /** Sent as is, for bodies that are not JSON. */
  readonly rawBody?: string;
  readonly headers?: Record<string, string>;
}

export interface HttpAnswer {
  readonly status: number;
  readonly headers: Headers;
  /** The parsed JSON body; undefined for an empty one. */
  readonly body: unknown;
  readonly text: string;
}

export async function call(
  baseUrl: string,
  method: string,
  path: string,
  options: CallOptions = {},
): Promise<HttpAnswer> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  } else if (options.rawBody !== undefined) body = options.rawBody;
  const response = await fetch(`${baseUrl}${path}`, { method, headers, body });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: text === '' ? undefined : (JSON.parse(text) as unknown),
    text,
  };
}

export interface SignInResult {
  readonly token: string;
  readonly expiresAt: string;
  readonly address: string;
}

/** The spec's sign-in flow over HTTP with a real wallet: challenge, personal_sign, verify. */
export async function signInOverHttp(baseUrl: string, wallet: HDNodeWallet): Promise<SignInResult> {
  const challenge = await call(baseUrl, 'GET', `/api/auth/challenge?address=${wallet.address}`);
  if (challenge.status !== 200) throw new Error(`challenge answered ${challenge.status}: ${challenge.text}`);
  const { message } = challenge.body as { message: string };
  const signature = await wallet.signMessage(message);
  const verified = await call(baseUrl, 'POST', '/api/auth/verify', { body: { message, signature } });
  if (verified.status !== 200) throw new Error(`verify answered ${verified.status}: ${verified.text}`);
  return verified.body as SignInResult;
}

export function randomWallet(): HDNodeWallet {
  return Wallet.createRandom();
}
