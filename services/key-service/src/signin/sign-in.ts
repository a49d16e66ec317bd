import type { WalletAddress } from '../wallet/wallet-address.js';
import { parseWalletAddress } from '../wallet/wallet-address.js';
import type { SignInChallenge, SignInChallenges } from './sign-in-challenges.js';
import type { AuthenticatedWallet, SignInTokens } from './sign-in-tokens.js';
import type { SignedMessageVerifier } from './signed-message-verifier.js';

/** The sign-in result of docs/api.md (plus the address, so a client need not decode the token). */
export interface SignInResult {
  readonly token: string;
  readonly expiresAt: Date;
  readonly address: WalletAddress;
}

/** Wallet sign-in end to end: challenge, verify a signed challenge, and check the token it yields. */
export class SignIn {
  constructor(
    private readonly challenges: SignInChallenges,
    private readonly verifier: SignedMessageVerifier,
    private readonly tokens: SignInTokens,
  ) {}

  challenge(rawAddress: string): Promise<SignInChallenge> {
    return this.challenges.issue(parseWalletAddress(rawAddress));
  }

  async verify(message: string, signature: string): Promise<SignInResult> {
    const address = await this.verifier.verify(message, signature);
    const { token, expiresAt } = await this.tokens.issue(address);
    return { token, expiresAt, address };
  }

  authenticate(token: string): Promise<AuthenticatedWallet> {
    return this.tokens.authenticate(token);
  }
}
