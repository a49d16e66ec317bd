import { createHash, randomBytes } from 'node:crypto';
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

/** What spending a nonce with a message found. */
export type NonceSpend =
  /** The nonce was live and the message is the one issued with it: spent now, by this caller only. */
  | 'spent'
  /** The nonce is live but was issued with another message: left as it was. */
  | 'other-message'
  /** No such nonce: never issued, expired, or already spent. */
  | 'unknown';

/**
 * Server-chosen single-use nonces, each bound to the exact message issued with it (and so to the address,
 * statement, times and every other field) and kept in the shared store for the challenge TTL, so any
 * replica can verify a challenge another replica issued.
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
    await this.values.set(nonceKey(nonce), digestOf(message), this.settings.challengeTtlMs);
    return { nonce, message, expiresAt };
  }

  /**
   * Spends the nonce when it is live and `message` is, byte for byte, the message issued with it; in one
   * atomic step, so of concurrent callers at most one gets 'spent'. Any other message leaves the nonce
   * untouched: whoever learned a nonce cannot burn its owner's challenge by posting something else for it
   * (even a variant the owner's wallet was tricked into signing), and the exact issued message can only
   * reach this point signed by the address it names.
   */
  async consume(nonce: string, message: string): Promise<NonceSpend> {
    const key = nonceKey(nonce);
    if (await this.values.compareAndDelete(key, digestOf(message))) return 'spent';
    // Only words the refusal: a nonce spent or expired between the two calls changes nothing else.
    return (await this.values.get(key)) === null ? 'unknown' : 'other-message';
  }
}

function nonceKey(nonce: string): string {
  return `siwe-nonce:${nonce}`;
}

/** What the store keeps for a nonce: the issued message's hash, never compared after any normalisation. */
function digestOf(message: string): string {
  return `sha256:${createHash('sha256').update(message, 'utf8').digest('hex')}`;
}
