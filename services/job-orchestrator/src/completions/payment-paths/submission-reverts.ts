import { AppError, type Store } from '@svc/platform';

export interface SubmissionRevertSettings {
  /** Reverted submissions of one wallet within `windowMs` after which the wallet is not served. */
  readonly limit: number;
  /** How long a wallet's reverted submissions are counted, and how long it is refused once over the limit. */
  readonly windowMs: number;
}

const FIELD = 'reverted';

/**
 * Remembers, over every replica, the wallets whose delegate-path submissions were mined and reverted.
 * Such a revert costs the service the transaction's gas and its blob, and the session owner (the
 * wallet) can cause it at will by closing its session under a pending submission (a front-run). Past
 * `limit` reverts in a window the wallet is refused before anything is sent, for the rest of the window.
 */
export class SubmissionReverts {
  constructor(
    private readonly store: Pick<Store, 'counters'>,
    private readonly settings: SubmissionRevertSettings,
  ) {}

  /** Counts one reverted submission of `wallet`; the count lapses `windowMs` after the first one. */
  async record(wallet: string): Promise<void> {
    await this.store.counters.increment(keyOf(wallet), FIELD, 1, { ttlMs: this.settings.windowMs });
  }

  /** Refuses (429 `rate_limit_exceeded`, with `retry-after`) a wallet over the limit. */
  async refuseIfBarred(wallet: string): Promise<void> {
    const counted = (await this.store.counters.get(keyOf(wallet)))[FIELD] ?? 0n;
    if (counted < BigInt(this.settings.limit)) return;
    throw new AppError('rate_limit_exceeded', {
      message:
        "This wallet's job submissions keep reverting on chain (its sessions were closed under them): it is not served for a while.",
      retryAfterSeconds: Math.ceil(this.settings.windowMs / 1000),
    });
  }
}

function keyOf(wallet: string): string {
  return `submissions:reverted:${wallet.toLowerCase()}`;
}
