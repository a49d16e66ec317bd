import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { ApiKeyJson } from '@svc/api';
import type { ApiKey } from '@svc/proto/gen/svc/key/v1/api_key_pb';

function isoTime(timestamp: Timestamp | undefined): string | null {
  return timestamp === undefined ? null : timestampDate(timestamp).toISOString();
}

/** A key from the key-service as `/api/api-keys` lists it (docs/api.md, API key resource). */
export function apiKeyJson(key: ApiKey): ApiKeyJson {
  const hits = key.limitHits;
  return {
    id: key.id,
    prefix: key.prefix,
    name: key.name,
    spendCapWei: key.spendCapWei?.decimal ?? null,
    spentWei: key.spentWei?.decimal ?? '0',
    // Counters of refusals stay far below 2^53, so JSON numbers carry them exactly.
    limitHits: {
      rate: Number(hits?.rate ?? 0n),
      concurrency: Number(hits?.concurrency ?? 0n),
      spendCap: Number(hits?.spendCap ?? 0n),
      sessionOpens: Number(hits?.sessionOpens ?? 0n),
    },
    createdAt: isoTime(key.createdAt) ?? new Date(0).toISOString(),
    revokedAt: isoTime(key.revokedAt),
  };
}
