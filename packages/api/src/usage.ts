// The usage history of `/api/usage` (docs/api.md, Usage): the `/v1` calls a wallet made, as it may see them.

/** One `/v1` completion call. */
export interface UsageRecordJson {
  /** The call's id (its spend reservation, or its per-call payment's reservation). */
  readonly id: string;
  /** When the call was accepted, ISO 8601 UTC. */
  readonly time: string;
  /** The API key of the call; null for a call paid per call without a key. */
  readonly keyId: string | null;
  /** The wallet that pays: the key's wallet, or the per-call payer. EIP-55. */
  readonly payer: string;
  /** `api_key` (from the wallet's prepaid balance through its delegate) or `per_call` (x402). */
  readonly payment: 'api_key' | 'per_call';
  readonly model: string;
  /** `answered`, the error code the call ended with, or `pending` while it is under way. */
  readonly outcome: string;
  /** The job on `JobRegistry` (a uint256 as a decimal string); null when no job was submitted. */
  readonly jobId: string | null;
  readonly sessionId: string | null;
  /** The transaction that submitted the job. */
  readonly txHash: string | null;
  /** The worker that answered (or last held the job). EIP-55. */
  readonly worker: string | null;
  /** Wei, decimal: the fee charged; `"0"` with no job or a refunded fee; null while escrowed. */
  readonly feeWei: string | null;
  /** Oldest messages left out so the prompt fit one job. */
  readonly droppedMessages: number;
  /** Milliseconds to the first output; null when none reached the caller or it is unknown. */
  readonly timeToFirstTokenMs: number | null;
  /** Milliseconds from the call's acceptance to its end; null while under way or unknown. */
  readonly totalTimeMs: number | null;
}

/** One key's spend and calls on one UTC day. */
export interface UsageDayJson {
  /** `YYYY-MM-DD` (UTC). */
  readonly day: string;
  /** Null for per-call payments without a key. */
  readonly keyId: string | null;
  readonly spentWei: string;
  readonly calls: number;
}

export interface UsageOutcomeJson {
  readonly outcome: string;
  readonly calls: number;
}

/** `GET /api/usage`. */
export interface UsageListJson {
  /** Newest first. */
  readonly data: readonly UsageRecordJson[];
  /** Pass as `cursor` for the next page; null on the last page. */
  readonly nextCursor: string | null;
  /** Totals over everything the query selects (not only this page); on the first page only, else null. */
  readonly summary: {
    readonly days: readonly UsageDayJson[];
    readonly outcomes: readonly UsageOutcomeJson[];
  } | null;
}
