// The API key resource of `/api/api-keys` (docs/api.md, API key resource).

/** How often each limit refused a key, each a JSON number. */
export interface LimitHitsJson {
  readonly rate: number;
  readonly concurrency: number;
  readonly spendCap: number;
  readonly sessionOpens: number;
}

/** An API key as listed: `GET /api/api-keys`, and the answer to a mint or a cap change. */
export interface ApiKeyJson {
  /** The key's id (a UUID), used in `/api/api-keys/{id}` paths. */
  readonly id: string;
  /** `svc_` and the key's next seven characters: names the key without revealing it. */
  readonly prefix: string;
  /** Up to 64 characters; `""` when none was given. */
  readonly name: string;
  /** Lifetime spend cap in wei, a decimal string; null means no cap. */
  readonly spendCapWei: string | null;
  /** What the key has spent, in wei. */
  readonly spentWei: string;
  readonly limitHits: LimitHitsJson;
  /** ISO 8601 UTC. */
  readonly createdAt: string;
  /** ISO 8601 UTC; null while the key is active. */
  readonly revokedAt: string | null;
}

/** The answer to a mint (`201`): the key as listed plus the full key, shown this once and never again. */
export interface MintedApiKeyJson extends ApiKeyJson {
  readonly key: string;
}

/** `POST /api/api-keys`: both fields optional; any other is ignored. */
export interface MintKeyRequestJson {
  readonly name?: string;
  /** A decimal string in wei; no cap when omitted or null. */
  readonly spendCapWei?: string | null;
}

/** `PATCH /api/api-keys/{id}`: the new cap, or null for none. */
export interface SpendCapRequestJson {
  readonly spendCapWei: string | null;
}
