import type { TransactionLane } from './operator-lanes.js';

/** What the sender signed, recorded before it is broadcast so no signed transaction is ever unknown. */
export interface SentTransactionRecord {
  readonly account: string;
  readonly nonce: number;
  readonly hash: string;
  /** The signed transaction as broadcast (network form, blob sidecar included). */
  readonly rawTransaction: string;
  readonly lane: TransactionLane;
  /** `call` carries an intent; `filler` is a 0-value self-transfer that closes a nonce gap. */
  readonly purpose: 'call' | 'filler';
  readonly to: string;
  readonly maxFeePerGas: bigint;
  readonly maxPriorityFeePerGas: bigint;
  readonly maxFeePerBlobGas: bigint | null;
  /** Hash of the transaction this one replaces at the same nonce, if any. */
  readonly replaces: string | null;
  readonly signedAtMs: number;
}

/**
 * Durable memory of signed transactions per (account, nonce). Shared by the replicas sending from
 * one account, it lets any of them rebroadcast a transaction whose sender died mid-flight instead of
 * overwriting its nonce.
 */
export interface SentTransactionJournal {
  record(entry: SentTransactionRecord): Promise<void>;
  /** Everything signed at this nonce, oldest first. */
  atNonce(account: string, nonce: number): Promise<SentTransactionRecord[]>;
  /** Forgets the records below `nonce` (they are final on chain). */
  forgetBelow(account: string, nonce: number): Promise<void>;
}

/** The embedded journal: one process, lost on restart. */
export class InMemorySentTransactionJournal implements SentTransactionJournal {
  readonly #byAccount = new Map<string, Map<number, SentTransactionRecord[]>>();

  async record(entry: SentTransactionRecord): Promise<void> {
    const account = entry.account.toLowerCase();
    let byNonce = this.#byAccount.get(account);
    if (!byNonce) this.#byAccount.set(account, (byNonce = new Map()));
    const records = byNonce.get(entry.nonce) ?? [];
    byNonce.set(entry.nonce, [...records, entry]);
  }

  async atNonce(account: string, nonce: number): Promise<SentTransactionRecord[]> {
    return [...(this.#byAccount.get(account.toLowerCase())?.get(nonce) ?? [])];
  }

  async forgetBelow(account: string, nonce: number): Promise<void> {
    const byNonce = this.#byAccount.get(account.toLowerCase());
    if (!byNonce) return;
    for (const recorded of byNonce.keys()) if (recorded < nonce) byNonce.delete(recorded);
  }
}
