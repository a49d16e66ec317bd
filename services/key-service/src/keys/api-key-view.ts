/** How often each limit refused a key's calls (`limitHits` in docs/api.md). */
export interface LimitHitCounts {
  readonly rate: bigint;
  readonly concurrency: bigint;
  readonly spendCap: bigint;
  readonly sessionOpens: bigint;
}

/** A key as listed: never the key itself or its hash. */
export interface ApiKeyView {
  readonly id: string;
  readonly prefix: string;
  readonly name: string;
  readonly spendCapWei: bigint | null;
  readonly spentWei: bigint;
  readonly limitHits: LimitHitCounts;
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
}

/** The columns of an `api_keys` row a listing needs, as Prisma returns them. */
export interface ApiKeyRow {
  id: string;
  prefix: string;
  name: string;
  spendCapWei: { toFixed(): string } | null;
  spentWei: { toFixed(): string };
  rateHits: bigint;
  concurrencyHits: bigint;
  spendCapHits: bigint;
  sessionOpenHits: bigint;
  createdAt: Date;
  revokedAt: Date | null;
}

/** The columns `apiKeyView` reads; pass as Prisma's `select` so no query ever loads the key hash. */
export const API_KEY_VIEW_COLUMNS = {
  id: true,
  prefix: true,
  name: true,
  spendCapWei: true,
  spentWei: true,
  rateHits: true,
  concurrencyHits: true,
  spendCapHits: true,
  sessionOpenHits: true,
  createdAt: true,
  revokedAt: true,
} as const;

export function apiKeyView(row: ApiKeyRow): ApiKeyView {
  return {
    id: row.id,
    prefix: row.prefix,
    name: row.name,
    // numeric(78,0) arrives as a Decimal; toFixed() prints every digit, never an exponent.
    spendCapWei: row.spendCapWei === null ? null : BigInt(row.spendCapWei.toFixed()),
    spentWei: BigInt(row.spentWei.toFixed()),
    limitHits: {
      rate: row.rateHits,
      concurrency: row.concurrencyHits,
      spendCap: row.spendCapHits,
      sessionOpens: row.sessionOpenHits,
    },
    createdAt: row.createdAt,
    revokedAt: row.revokedAt,
  };
}
