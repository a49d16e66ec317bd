import { randomUUID } from 'node:crypto';
import { AppError, type RevocationMarkers } from '@svc/platform';
import { inTransaction, type PrismaClient, type Transaction } from '../db/database.js';
import { KeyEventKind, recordKeyChange } from '../events/key-event-outbox.js';
import type { WalletAddress } from '../wallet/wallet-address.js';
import { generateApiKeySecret, type ApiKeyHasher } from './api-key-secret.js';
import { API_KEY_VIEW_COLUMNS, apiKeyView, type ApiKeyView } from './api-key-view.js';
import { isKeyId } from './key-id.js';
import type { LimitHits } from './limit-hits.js';

export const MAX_KEY_NAME_LENGTH = 64;

/** Class id of the per-wallet advisory locks (the first half of PostgreSQL's two-int lock key). */
const WALLET_LOCK_CLASS = 0x6b657973; // "keys"

export interface MintRequest {
  readonly name?: string;
  readonly spendCapWei?: bigint;
}

export interface MintedKey {
  readonly apiKey: ApiKeyView;
  /** The full key, returned this once; only its hash is stored. */
  readonly fullKey: string;
}

export interface ApiKeysSettings {
  readonly maxActiveKeysPerWallet: number;
}

/**
 * A wallet's API keys through their states (active → revoked → deleted). Every change takes the wallet's
 * lock for its transaction, so limits hold under concurrency and one wallet's key events are written in
 * the order the changes happened; each change writes its event to the outbox in the same transaction.
 * A key of another wallet is reported exactly like an unknown key.
 */
export class ApiKeys {
  constructor(
    private readonly db: PrismaClient,
    private readonly hasher: ApiKeyHasher,
    private readonly revocations: RevocationMarkers,
    private readonly settings: ApiKeysSettings,
    /** Adds the refusals still pending in the store to the keys as listed (read your writes). */
    private readonly limitHits: Pick<LimitHits, 'holdBatches' | 'withPending'>,
    /** Told after each committed change (wakes the outbox relay, counts it). */
    private readonly onChange: (kind: KeyEventKind) => void = () => undefined,
  ) {}

  async mint(wallet: WalletAddress, request: MintRequest): Promise<MintedKey> {
    const name = checkedKeyName(request.name ?? '');
    const secret = generateApiKeySecret();
    const row = await inTransaction(this.db, async (tx) => {
      await lockWallet(tx, wallet);
      const active = await tx.apiKey.count({
        where: { wallet: wallet.lowercase, revokedAt: null, deletedAt: null },
      });
      if (active >= this.settings.maxActiveKeysPerWallet) {
        throw new AppError('api_key_limit', {
          message: `The wallet already holds ${this.settings.maxActiveKeysPerWallet} active keys; revoke one first.`,
        });
      }
      const created = await tx.apiKey.create({
        data: {
          id: randomUUID(),
          wallet: wallet.lowercase,
          keyHash: this.hasher.hash(secret.fullKey),
          prefix: secret.prefix,
          name,
          spendCapWei: request.spendCapWei?.toString() ?? null,
        },
        select: API_KEY_VIEW_COLUMNS,
      });
      await recordKeyChange(tx, {
        kind: KeyEventKind.MINTED,
        wallet,
        keyId: created.id,
        prefix: created.prefix,
        spendCapWei: request.spendCapWei ?? null,
      });
      return created;
    });
    this.onChange(KeyEventKind.MINTED);
    return { apiKey: apiKeyView(row), fullKey: secret.fullKey };
  }

  /**
   * Every key of the wallet that is not deleted, revoked ones included, newest first, with every refusal
   * counted so far in its `limitHits`, also those still waiting in the store for the next flush.
   */
  async list(wallet: WalletAddress): Promise<ApiKeyView[]> {
    return inTransaction(this.db, async (tx) => {
      await this.limitHits.holdBatches(tx);
      const rows = await tx.apiKey.findMany({
        where: { wallet: wallet.lowercase, deletedAt: null },
        orderBy: { mintSequence: 'desc' },
        select: API_KEY_VIEW_COLUMNS,
      });
      return this.limitHits.withPending(tx, rows.map(apiKeyView));
    });
  }

  /**
   * Sets (a bigint) or removes (null) a key's lifetime cap; a revoked key keeps its cap. Answers the key as
   * listed (its pending refusals included).
   */
  async updateSpendCap(
    wallet: WalletAddress,
    keyId: string,
    spendCapWei: bigint | null,
  ): Promise<ApiKeyView> {
    const view = await inTransaction(this.db, async (tx) => {
      await lockWallet(tx, wallet);
      // Before the row is changed: a batch being applied takes this lock before it locks rows.
      await this.limitHits.holdBatches(tx);
      const key = await findOwnedKey(tx, wallet, keyId);
      if (key.revokedAt !== null) throw new AppError('api_key_revoked');
      const updated = await tx.apiKey.update({
        where: { id: key.id },
        data: { spendCapWei: spendCapWei?.toString() ?? null },
        select: API_KEY_VIEW_COLUMNS,
      });
      await recordKeyChange(tx, {
        kind: KeyEventKind.CAP_CHANGED,
        wallet,
        keyId: key.id,
        prefix: key.prefix,
        spendCapWei,
      });
      const [listed] = await this.limitHits.withPending(tx, [apiKeyView(updated)]);
      return listed as ApiKeyView;
    });
    this.onChange(KeyEventKind.CAP_CHANGED);
    return view;
  }

  /**
   * Revokes a key and writes its revocation marker to the shared store before returning, so every gateway
   * refuses it from the next request on. Revoking a revoked key changes nothing but writes the marker
   * again (a retry after a failed marker write heals that way).
   */
  async revoke(wallet: WalletAddress, keyId: string): Promise<void> {
    const changed = await inTransaction(this.db, async (tx) => {
      await lockWallet(tx, wallet);
      const key = await findOwnedKey(tx, wallet, keyId);
      if (key.revokedAt !== null) return false;
      await tx.apiKey.update({ where: { id: key.id }, data: { revokedAt: new Date() } });
      await recordKeyChange(tx, { kind: KeyEventKind.REVOKED, wallet, keyId: key.id, prefix: key.prefix });
      return true;
    });
    await this.revocations.mark(keyId);
    if (changed) this.onChange(KeyEventKind.REVOKED);
  }

  /** Deletes a revoked key: it leaves the listing and stays as a tombstone for its spend history. */
  async delete(wallet: WalletAddress, keyId: string): Promise<void> {
    await inTransaction(this.db, async (tx) => {
      await lockWallet(tx, wallet);
      const key = await findOwnedKey(tx, wallet, keyId);
      if (key.revokedAt === null) throw new AppError('api_key_active');
      await tx.apiKey.update({ where: { id: key.id }, data: { deletedAt: new Date() } });
      await recordKeyChange(tx, { kind: KeyEventKind.DELETED, wallet, keyId: key.id, prefix: key.prefix });
    });
    // Already marked when it was revoked; marking again covers a revocation whose marker write was lost.
    await this.revocations.mark(keyId);
    this.onChange(KeyEventKind.DELETED);
  }
}

// Control characters (C0, DEL, C1) have no place in a label; NUL is refused by PostgreSQL itself.
const CONTROL_CHARACTER = /\p{Cc}/u;

/** A key name as docs/api.md allows it: at most 64 code points, no control characters. */
function checkedKeyName(name: string): string {
  if ([...name].length > MAX_KEY_NAME_LENGTH) {
    throw new AppError('invalid_request', {
      message: `name must be at most ${MAX_KEY_NAME_LENGTH} characters.`,
    });
  }
  if (CONTROL_CHARACTER.test(name)) {
    throw new AppError('invalid_request', { message: 'name must not contain control characters.' });
  }
  return name;
}

/**
 * Serializes the changes of one wallet until the transaction ends. Lock keys may collide between wallets
 * (hashtext is 32 bits), which only makes two wallets wait for each other now and then.
 */
async function lockWallet(tx: Transaction, wallet: WalletAddress): Promise<void> {
  await tx.$executeRaw`SELECT pg_advisory_xact_lock(${WALLET_LOCK_CLASS}::int4, hashtext(${wallet.lowercase}))`;
}

/** The wallet's live (not deleted) key; `api_key_not_found` for an unknown id and for another wallet's key alike. */
async function findOwnedKey(tx: Transaction, wallet: WalletAddress, keyId: string) {
  if (!isKeyId(keyId)) throw new AppError('api_key_not_found');
  const key = await tx.apiKey.findFirst({
    where: { id: keyId, wallet: wallet.lowercase, deletedAt: null },
    select: { id: true, prefix: true, revokedAt: true },
  });
  if (!key) throw new AppError('api_key_not_found');
  return key;
}
