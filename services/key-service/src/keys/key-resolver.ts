import { AppError, type Logger, type RevocationMarkers } from '@svc/platform';
import type { PrismaClient } from '../db/database.js';
import { walletFromStored, type WalletAddress } from '../wallet/wallet-address.js';
import { hasApiKeyShape, type ApiKeyHasher } from './api-key-secret.js';

export type ApiKeyState = 'active' | 'revoked';

/** What the gateway needs to authorize a `/v1` call made with a key. */
export interface ResolvedKey {
  readonly keyId: string;
  readonly prefix: string;
  readonly wallet: WalletAddress;
  readonly state: ApiKeyState;
  readonly spendCapWei: bigint | null;
}

/**
 * Finds the key behind a presented credential on every `/v1` call. The revocation marker is read on
 * every call, besides the row, so a revocation is in force the moment its marker is written.
 */
export class KeyResolver {
  constructor(
    private readonly db: PrismaClient,
    private readonly hasher: ApiKeyHasher,
    private readonly revocations: RevocationMarkers,
    private readonly logger?: Logger,
  ) {}

  /** `invalid_api_key` for anything that is not a live (not deleted) key of ours. */
  async resolve(presentedKey: string): Promise<ResolvedKey> {
    if (!hasApiKeyShape(presentedKey)) throw new AppError('invalid_api_key');
    const row = await this.db.apiKey.findUnique({
      where: { keyHash: this.hasher.hash(presentedKey) },
      select: { id: true, prefix: true, wallet: true, spendCapWei: true, revokedAt: true, deletedAt: true },
    });
    if (!row || row.deletedAt !== null) throw new AppError('invalid_api_key');
    const marked = await this.revocations.isMarked(row.id);
    if (row.revokedAt !== null && !marked) await this.healMarker(row.id);
    return {
      keyId: row.id,
      prefix: row.prefix,
      wallet: walletFromStored(row.wallet),
      state: row.revokedAt !== null || marked ? 'revoked' : 'active',
      spendCapWei: row.spendCapWei === null ? null : BigInt(row.spendCapWei.toFixed()),
    };
  }

  // A revocation committed but its marker write failed (the caller saw an error and may not retry):
  // writing it now keeps gateways that trust the marker from serving the key.
  private async healMarker(keyId: string): Promise<void> {
    try {
      await this.revocations.mark(keyId);
      this.logger?.warn({ keyId }, 'wrote a missing revocation marker of a revoked key');
    } catch (error) {
      this.logger?.error({ err: error, keyId }, 'could not write a missing revocation marker');
    }
  }
}
