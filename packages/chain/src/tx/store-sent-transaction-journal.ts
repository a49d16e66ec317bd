import type { Store } from '@svc/platform';
import type { TransactionLane } from './operator-lanes.js';
import type { SentTransactionJournal, SentTransactionRecord } from './sent-transaction-journal.js';
import { isRecord } from '@svc/api';

/** Version of the stored record format (`v` of the JSON). */
export const SENT_TRANSACTION_RECORD_VERSION = 1;

/** Default time the records of one nonce are kept after the newest of them was written: 7 days. */
export const DEFAULT_SENT_TRANSACTION_RETENTION_MS = 7 * 24 * 60 * 60 * 1_000;

/** Most nonces one `forgetBelow` call drops, so its cost stays constant whatever the history. */
const MAX_FORGOTTEN_NONCES_PER_CALL = 64;

/** Records read per store round trip; a nonce rarely holds more than a handful. */
const READ_PAGE = 100;

export interface StoreSentTransactionJournalOptions {
  /**
   * How long the records of one nonce live after the newest of them was written. Default 7 days, far
   * beyond finality: the TTL is what bounds the journal, `forgetBelow` only frees space sooner.
   */
  readonly retentionMs?: number;
}

/**
 * The journal in the store port, shared by every replica that sends from the same accounts and kept
 * across restarts: one frame stream per (account, nonce), one frame per signed transaction, with the
 * transaction hash as the frame's dedup id. A stream appends atomically and keeps append order, so a
 * record written twice (a retry, or two replicas) is kept once and `atNonce` reads oldest first.
 *
 * Forgetting: frame streams can be expired but not listed, so the journal cannot find its old nonces
 * cheaply. Every stream therefore carries a TTL (`retentionMs`, refreshed by each record at that
 * nonce) that bounds the journal on its own, and `forgetBelow` is a best effort of constant cost: it
 * drops at most the 64 nonces just below the floor it is given, and skips those this instance already
 * dropped, so a sender that forgets as it mines keeps the journal short and a restart leaves at most
 * the stretch it skipped to the TTL.
 */
export class StoreSentTransactionJournal implements SentTransactionJournal {
  readonly #frames: Store['frames'];
  readonly #retentionMs: number;
  /** Lower-cased account → every nonce below this was forgotten by this instance. */
  readonly #forgottenBelow = new Map<string, number>();

  constructor(store: Pick<Store, 'frames'>, options: StoreSentTransactionJournalOptions = {}) {
    const retentionMs = options.retentionMs ?? DEFAULT_SENT_TRANSACTION_RETENTION_MS;
    if (!Number.isSafeInteger(retentionMs) || retentionMs < 1) {
      throw new RangeError(`retentionMs must be a positive integer, got ${String(retentionMs)}`);
    }
    this.#frames = store.frames;
    this.#retentionMs = retentionMs;
  }

  async record(entry: SentTransactionRecord): Promise<void> {
    const payload = encodeSentTransactionRecord(entry);
    const key = streamKeyOf(entry.account, entry.nonce);
    await this.#frames.append(key, entry.hash.toLowerCase(), payload);
    // A second step: a crash right here leaves this nonce without a TTL until a later record at it
    // or `forgetBelow` reaches it. A duplicate record refreshes the TTL too, which repairs that.
    await this.#frames.expire(key, this.#retentionMs);
  }

  async atNonce(account: string, nonce: number): Promise<SentTransactionRecord[]> {
    const key = streamKeyOf(account, nonce);
    const records: SentTransactionRecord[] = [];
    let cursor: string | null = null;
    for (;;) {
      const page = await this.#frames.read(key, cursor, { count: READ_PAGE });
      records.push(...page.map((frame) => decodeSentTransactionRecord(frame.payload)));
      if (page.length < READ_PAGE) return records;
      cursor = page.at(-1)!.cursor;
    }
  }

  /**
   * Best effort, see the class comment: never more than 64 store calls, and a failing store is left
   * to the TTL rather than failing the caller (the sender forgets right after a transaction is mined).
   */
  async forgetBelow(account: string, nonce: number): Promise<void> {
    if (!Number.isSafeInteger(nonce)) throw new RangeError(`nonce must be an integer, got ${String(nonce)}`);
    const address = requireAccount(account).toLowerCase();
    const done = this.#forgottenBelow.get(address) ?? 0;
    if (nonce <= done) return;
    this.#forgottenBelow.set(address, nonce);
    const from = Math.max(done, nonce - MAX_FORGOTTEN_NONCES_PER_CALL);
    const keys = Array.from({ length: nonce - from }, (_, i) => streamKeyOf(address, from + i));
    await Promise.all(keys.map((key) => this.#frames.expire(key, 1).catch(() => false)));
  }
}

/** The versioned JSON of a record, wei amounts as decimal strings. */
export function encodeSentTransactionRecord(entry: SentTransactionRecord): Uint8Array {
  requireAccount(entry.account);
  requireNonce(entry.nonce);
  if (typeof entry.hash !== 'string' || entry.hash.length === 0) {
    throw new RangeError('a sent transaction record needs its hash');
  }
  const stored: StoredRecordV1 = {
    v: SENT_TRANSACTION_RECORD_VERSION,
    account: entry.account,
    nonce: entry.nonce,
    hash: entry.hash,
    rawTransaction: entry.rawTransaction,
    lane: entry.lane,
    purpose: entry.purpose,
    to: entry.to,
    maxFeePerGas: weiToString('maxFeePerGas', entry.maxFeePerGas),
    maxPriorityFeePerGas: weiToString('maxPriorityFeePerGas', entry.maxPriorityFeePerGas),
    maxFeePerBlobGas:
      entry.maxFeePerBlobGas === null ? null : weiToString('maxFeePerBlobGas', entry.maxFeePerBlobGas),
    replaces: entry.replaces,
    signedAtMs: entry.signedAtMs,
  };
  return new TextEncoder().encode(JSON.stringify(stored));
}

/** Reads what `encodeSentTransactionRecord` wrote; anything else (another version) is refused. */
export function decodeSentTransactionRecord(payload: Uint8Array): SentTransactionRecord {
  const parsed: unknown = JSON.parse(new TextDecoder().decode(payload));
  if (!isRecord(parsed)) throw malformed('not a JSON object');
  if (parsed.v !== SENT_TRANSACTION_RECORD_VERSION) {
    throw malformed(`unknown version ${JSON.stringify(parsed.v)}`);
  }
  return {
    account: stringField(parsed, 'account'),
    nonce: nonceField(parsed),
    hash: stringField(parsed, 'hash'),
    rawTransaction: stringField(parsed, 'rawTransaction'),
    lane: oneOf(parsed, 'lane', ['blob', 'plain'] as const satisfies readonly TransactionLane[]),
    purpose: oneOf(parsed, 'purpose', ['call', 'filler'] as const),
    to: stringField(parsed, 'to'),
    maxFeePerGas: weiField(parsed, 'maxFeePerGas'),
    maxPriorityFeePerGas: weiField(parsed, 'maxPriorityFeePerGas'),
    maxFeePerBlobGas: parsed.maxFeePerBlobGas === null ? null : weiField(parsed, 'maxFeePerBlobGas'),
    replaces: parsed.replaces === null ? null : stringField(parsed, 'replaces'),
    signedAtMs: numberField(parsed, 'signedAtMs'),
  };
}

interface StoredRecordV1 {
  readonly v: typeof SENT_TRANSACTION_RECORD_VERSION;
  readonly account: string;
  readonly nonce: number;
  readonly hash: string;
  readonly rawTransaction: string;
  readonly lane: TransactionLane;
  readonly purpose: SentTransactionRecord['purpose'];
  readonly to: string;
  readonly maxFeePerGas: string;
  readonly maxPriorityFeePerGas: string;
  readonly maxFeePerBlobGas: string | null;
  readonly replaces: string | null;
  readonly signedAtMs: number;
}

/** One stream per (account, nonce); the account lower-cased, so any spelling of it finds the same one. */
function streamKeyOf(account: string, nonce: number): string {
  requireAccount(account);
  requireNonce(nonce);
  return `sent-tx:${account.toLowerCase()}:${nonce}`;
}

function requireAccount(account: string): string {
  if (typeof account !== 'string' || account.length === 0) {
    throw new RangeError('account must be a non-empty string');
  }
  return account;
}

function requireNonce(nonce: number): void {
  if (!Number.isSafeInteger(nonce) || nonce < 0) {
    throw new RangeError(`nonce must be a non-negative integer, got ${String(nonce)}`);
  }
}

function weiToString(name: string, value: bigint): string {
  if (typeof value !== 'bigint' || value < 0n) {
    throw new RangeError(`${name} must be a non-negative bigint, got ${String(value)}`);
  }
  return value.toString(10);
}

function malformed(why: string): Error {
  return new TypeError(`malformed sent transaction record: ${why}`);
}

function stringField(record: Record<string, unknown>, name: string): string {
  const value = record[name];
  if (typeof value !== 'string') throw malformed(`${name} is not a string`);
  return value;
}

function numberField(record: Record<string, unknown>, name: string): number {
  const value = record[name];
  if (typeof value !== 'number' || !Number.isFinite(value)) throw malformed(`${name} is not a number`);
  return value;
}

function nonceField(record: Record<string, unknown>): number {
  const value = record.nonce;
  if (!Number.isSafeInteger(value) || (value as number) < 0) throw malformed('nonce is not a nonce');
  return value as number;
}

function weiField(record: Record<string, unknown>, name: string): bigint {
  const value = record[name];
  if (typeof value !== 'string' || !/^(0|[1-9]\d*)$/.test(value)) {
    throw malformed(`${name} is not a decimal wei amount`);
  }
  return BigInt(value);
}

function oneOf<const T extends string>(
  record: Record<string, unknown>,
  name: string,
  allowed: readonly T[],
): T {
  const value = record[name];
  if (!allowed.includes(value as T)) throw malformed(`${name} is not one of ${allowed.join(', ')}`);
  return value as T;
}
