import type { Signer } from 'ethers';

/**
 * Blob and plain transactions go out from disjoint accounts: a node refuses an account with both
 * kinds pending, and holds at most 16 pending blob transactions per account.
 */
export type TransactionLane = 'blob' | 'plain';

/** An account the sender signs with: the principal or one of its operators (docs/protocol.md, Contracts). */
export type SendingAccount = Signer & { readonly address: string };

export interface OperatorLanesOptions {
  readonly blob: readonly SendingAccount[];
  readonly plain: readonly SendingAccount[];
  /** Transactions this process keeps in flight per blob account. Default 16 (the node's limit). */
  readonly maxInFlightPerBlobAccount?: number;
  /** Transactions this process keeps in flight per plain account. Default 64. */
  readonly maxInFlightPerPlainAccount?: number;
}

/** A claim on one account of a lane for one transaction; `release` exactly once when it is done. */
export interface AccountLease {
  readonly account: SendingAccount;
  release(): void;
}

interface Slot {
  readonly account: SendingAccount;
  inFlight: number;
}

/** Hands out the least busy account of a lane, queueing callers while every account is full. */
export class OperatorLanes {
  readonly #slots: Record<TransactionLane, Slot[]>;
  readonly #limits: Record<TransactionLane, number>;
  readonly #waiting: Record<TransactionLane, (() => void)[]> = { blob: [], plain: [] };

  constructor(options: OperatorLanesOptions) {
    const blob = options.blob.map((account) => account.address.toLowerCase());
    const plain = new Set(options.plain.map((account) => account.address.toLowerCase()));
    if (blob.some((address) => plain.has(address))) {
      throw new Error('an account may serve only one lane: blob and plain accounts must differ');
    }
    this.#slots = {
      blob: options.blob.map((account) => ({ account, inFlight: 0 })),
      plain: options.plain.map((account) => ({ account, inFlight: 0 })),
    };
    this.#limits = {
      blob: options.maxInFlightPerBlobAccount ?? 16,
      plain: options.maxInFlightPerPlainAccount ?? 64,
    };
  }

  accounts(lane: TransactionLane): readonly SendingAccount[] {
    return this.#slots[lane].map((slot) => slot.account);
  }

  async acquire(lane: TransactionLane): Promise<AccountLease> {
    if (this.#slots[lane].length === 0) throw new Error(`no account configured for the ${lane} lane`);
    for (;;) {
      const slot = this.#leastBusy(lane);
      if (slot) {
        slot.inFlight += 1;
        let released = false;
        return {
          account: slot.account,
          release: () => {
            if (released) return;
            released = true;
            slot.inFlight -= 1;
            this.#waiting[lane].shift()?.();
          },
        };
      }
      await new Promise<void>((resolve) => this.#waiting[lane].push(resolve));
    }
  }

  #leastBusy(lane: TransactionLane): Slot | undefined {
    let best: Slot | undefined;
    for (const slot of this.#slots[lane]) {
      if (slot.inFlight >= this.#limits[lane]) continue;
      if (!best || slot.inFlight < best.inFlight) best = slot;
    }
    return best;
  }
}
