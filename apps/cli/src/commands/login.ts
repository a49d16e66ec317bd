import { SiweMessage } from 'siwe';
import { ApiClient } from '../api-client.js';
import type { CommandContext } from '../context.js';
import { EXIT, CliError } from '../errors.js';
import { loadWallet, type WalletOptions } from '../wallet.js';

/** `svc login`: Sign-In with Ethereum (challenge, personal_sign, verify); the token is cached until it expires. */
export async function login(context: CommandContext, options: WalletOptions): Promise<void> {
  const wallet = await loadWallet(options, context.walletSource);
  const api = new ApiClient(context.baseUrl);
  const spinner = (
    await context.output.progress(`Signing in ${wallet.address} at ${context.baseUrl}`)
  ).start();
  try {
    const { message } = await api.challenge(wallet.address);
    checkChallenge(message, context.baseUrl, wallet.address);
    const signIn = await api.verify(message, await wallet.signMessage(message));
    context.credentials.saveSignIn(context.baseUrl, signIn);
    spinner.stop();
    context.output.result(
      { address: signIn.address, expiresAt: signIn.expiresAt, baseUrl: context.baseUrl },
      () =>
        `Signed in as ${signIn.address} until ${signIn.expiresAt} (token kept in ${context.credentials.path})`,
    );
  } catch (error) {
    spinner.stop();
    throw error;
  }
}

/** `svc logout`: forgets the wallet's token and saved key at this service. */
export function logout(context: CommandContext): void {
  const forgot = context.credentials.forget(context.baseUrl, context.namedWallet);
  context.output.result({ baseUrl: context.baseUrl, forgot }, () =>
    forgot ? `Signed out of ${context.baseUrl}` : `Not signed in at ${context.baseUrl}`,
  );
}

/**
 * Signs only a message that signs in to the service asked: a server at another address could otherwise
 * relay the real service's challenge and receive a token for the wallet. The message must be EIP-4361,
 * for this wallet, with the base URL's host as its domain and its origin as the URI's.
 */
export function checkChallenge(message: string, baseUrl: string, address: string): void {
  let parsed: SiweMessage;
  try {
    parsed = new SiweMessage(message);
  } catch {
    throw refusal('the challenge is not a Sign-In with Ethereum message');
  }
  const expected = new URL(baseUrl);
  const uri = URL.canParse(parsed.uri) ? new URL(parsed.uri) : undefined;
  if (parsed.domain !== expected.host || uri?.origin !== expected.origin)
    throw refusal(`the challenge signs in to ${parsed.domain} (${parsed.uri}), not to ${expected.origin}`);
  if (parsed.address.toLowerCase() !== address.toLowerCase())
    throw refusal(`the challenge is for ${parsed.address}, not for ${address}`);
}

function refusal(reason: string): CliError {
  return new CliError(`not signing: ${reason}`, EXIT.failed, {
    remedy: 'Check the base URL (--base-url, SVC_BASE_URL): it must be the service itself',
  });
}
