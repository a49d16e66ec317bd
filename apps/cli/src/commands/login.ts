import { ApiClient } from '../api-client.js';
import type { CommandContext } from '../context.js';
import { loadWallet, type WalletOptions } from '../wallet.js';

/** `svc login`: Sign-In with Ethereum (challenge, personal_sign, verify); the token is cached until it expires. */
export async function login(context: CommandContext, options: WalletOptions): Promise<void> {
  const wallet = await loadWallet(options, context.env);
  const api = new ApiClient(context.baseUrl);
  const spinner = context.output.progress(`Signing in ${wallet.address} at ${context.baseUrl}`).start();
  try {
    const { message } = await api.challenge(wallet.address);
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
