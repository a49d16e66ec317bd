import type { KeyServiceMetrics } from '../observability/key-service-metrics.js';
import type { WalletAddress } from '../wallet/wallet-address.js';
import { parseWalletAddress } from '../wallet/wallet-address.js';
import type { SignInChallenge, SignInChallenges } from './sign-in-challenges.js';
import type { AuthenticatedWallet, SignInTokens } from './sign-in-tokens.js';
import { SignInRefusal, type SignedMessageVerifier } from './signed-message-verifier.js';

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
    private readonly metrics: KeyServiceMetrics,
  ) {}

  challenge(rawAddress: string): Promise<SignInChallenge> {
    return this.challenges.issue(parseWalletAddress(rawAddress));
  }

  async verify(message: string, signature: string): Promise<SignInResult> {
    let address: WalletAddress;
    try {
      address = await this.verifier.verify(message, signature);
    } catch (error) {
      // An outage (the store did not answer) is no refusal: the caller hears it as one of its own.
      if (error instanceof SignInRefusal) this.metrics.signInRefused(error.reason);
      throw error;
    }
    const { token, expiresAt } = await this.tokens.issue(address);
    this.metrics.signInVerified();
    return { token, expiresAt, address };
  }

  authenticate(token: string): Promise<AuthenticatedWallet> {
    return this.tokens.authenticate(token);
  }
}
