import { getAddress, hexlify, toUtf8Bytes } from 'ethers';
import type { SignInResultJson } from '@svc/api';
import { serviceApi } from '../api/service-api.js';
import type { Eip1193Provider } from './wallet-discovery.js';

/** EIP-3326's error when the wallet does not know the chain. */
const UNRECOGNIZED_CHAIN = 4902;

/** The chain id an EIP-4361 message names (`Chain ID: 31337`). */
export function chainIdOf(message: string): number {
  const match = /^Chain ID: (\d+)$/m.exec(message);
  if (!match) throw new Error('The sign-in message names no chain.');
  return Number(match[1]);
}

/** The wallet's first account, asking for access when the page has none yet. */
export async function requestAccount(provider: Eip1193Provider): Promise<string> {
  const accounts = (await provider.request({ method: 'eth_requestAccounts' })) as string[];
  if (!accounts?.[0]) throw new Error('The wallet shared no account.');
  return getAddress(accounts[0]);
}

/**
 * Makes the wallet use the service's chain: asks it to switch (EIP-3326) when it is elsewhere, and checks
 * that it did. A wallet that does not know the chain is told which one to add.
 */
export async function ensureChain(provider: Eip1193Provider, chainId: number): Promise<void> {
  const current = Number(await provider.request({ method: 'eth_chainId' }));
  if (current === chainId) return;
  try {
    await provider.request({
      method: 'wallet_switchEthereumChain',
      params: [{ chainId: `0x${chainId.toString(16)}` }],
    });
  } catch (error) {
    if ((error as { code?: unknown }).code === UNRECOGNIZED_CHAIN)
      throw new Error(`Your wallet does not know chain ${chainId}. Add it to the wallet, then try again.`, {
        cause: error,
      });
    throw error;
  }
  const switched = Number(await provider.request({ method: 'eth_chainId' }));
  if (switched !== chainId)
    throw new Error(`The wallet is on chain ${switched}; the service runs on chain ${chainId}.`);
}

/**
 * Sign-In with Ethereum as docs/api.md describes it: the server's challenge, signed unchanged with
 * `personal_sign`, then verified for a token. The wallet is moved to the challenge's chain first, so what
 * it shows the user is the chain the service checks.
 */
export async function signIn(provider: Eip1193Provider): Promise<SignInResultJson> {
  const address = await requestAccount(provider);
  const { message } = await serviceApi.challenge(address);
  await ensureChain(provider, chainIdOf(message));
  const signature = (await provider.request({
    method: 'personal_sign',
    params: [hexlify(toUtf8Bytes(message)), address],
  })) as string;
  return serviceApi.verify(message, signature);
}
