import { randomBytes } from 'node:crypto';
import { SiweMessage } from 'siwe';
import type { ExpiringValues } from '@svc/platform';
import type { WalletAddress } from '../wallet/wallet-address.js';

/** What every sign-in message must say; verification compares against this, never against the message. */
export interface SiweSettings {
  readonly domain: string;
  readonly uri: string;
  readonly chainId: number;
  readonly statement: string;
  readonly challengeTtlMs: number;
  readonly clockSkewMs: number;
}

export interface SignInChallenge {
  readonly nonce: string;
  readonly message: string;
  readonly expiresAt: Date;
}

/**
 * Server-chosen single-use nonces, each bound to the address that asked for it and kept in the shared
 * store for the challenge TTL, so any replica can verify a challenge another replica issued.
 */
export class SignInChallenges {
  constructor(
    private readonly values: ExpiringValues,
    private readonly settings: SiweSettings,
    private readonly now: () => Date = () => new Date(),
  ) {}

  async issue(address: WalletAddress): Promise<SignInChallenge> {
    // 128 bits as hex: alphanumeric, as EIP-4361 requires of a nonce.
    const nonce = randomBytes(16).toString('hex');
    const issuedAt = this.now();
    const expiresAt = new Date(issuedAt.getTime() + this.settings.challengeTtlMs);
    const message = new SiweMessage({
      domain: this.settings.domain,
      address: address.checksummed,
      statement: this.settings.statement,
      uri: this.settings.uri,
      version: '1',
      chainId: this.settings.chainId,
      nonce,
      issuedAt: issuedAt.toISOString(),
      expirationTime: expiresAt.toISOString(),
    }).prepareMessage();
    await this.values.set(nonceKey(nonce), address.lowercase, this.settings.challengeTtlMs);
    return { nonce, message, expiresAt };
  }

  /**
   * Spends the nonce when it is live and was issued to `address`, atomically: of concurrent callers at
   * most one succeeds, and a nonce issued to another address is left untouched for its owner.
   */
  consume(nonce: string, address: WalletAddress): Promise<boolean> {
    return this.values.compareAndDelete(nonceKey(nonce), address.lowercase);
  }
}

function nonceKey(nonce: string): string {
  return `siwe-nonce:${nonce}`;
}
