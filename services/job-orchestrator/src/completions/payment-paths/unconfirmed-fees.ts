import type { Store } from '@svc/platform';

/** Longer than any submission stays unmined (the sender gives up within minutes); a lost release lapses. */
const UNCONFIRMED_FEES_TTL_MS = 10 * 60_000;

function unconfirmedKey(wallet: string): string {
  return `payments:unconfirmed:${wallet.toLowerCase()}`;
}

/** A wallet's fee held for one submission until it lands or fails; `release` is idempotent. */
export interface HeldFee {
  /** Every fee of the wallet held now, this one included. */
  readonly total: bigint;
  release(): Promise<void>;
}

/**
 * Fees of a wallet's submissions signed and not yet mined, in the shared store so every replica's payment
 * check counts them. The fast path answers a call before its submission lands, and the chain's balance and
 * allowance only show a job once mined: without this, a wallet whose balance covers one job could have two
 * answered at once, the second's submission reverting unpaid (docs/protocol.md, Starting before inclusion).
 * A hold is taken atomically (an increment), so of concurrent calls the ones beyond the wallet's means see
 * it. A replica that dies holding a fee leaves it until the record's TTL: the wallet is held back, never
 * let past its means.
 */
export class UnconfirmedFees {
  constructor(private readonly store: Pick<Store, 'counters'>) {}

  async hold(wallet: string, fee: bigint): Promise<HeldFee> {
    const key = unconfirmedKey(wallet);
    const total = await this.store.counters.increment(key, 'wei', fee, { ttlMs: UNCONFIRMED_FEES_TTL_MS });
    let released = false;
    return {
      total,
      release: async () => {
        if (released) return;
        released = true;
        await this.store.counters.increment(key, 'wei', -fee);
      },
    };
  }
}
