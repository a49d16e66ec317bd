import {
  LIMIT_HITS_TALLY,
  type LimitHitKind,
  type Logger,
  type Tallies,
  type TallyBatch,
} from '@svc/platform';
import { RpcError } from '@svc/proto';
import { LimitKind } from '@svc/proto/gen/svc/key/v1/api_key_pb';
import type { KeyServiceClient } from '../key-service-client.js';

// The tally and its fields (`<kind>:<keyId>`) are shared with the key-service, which adds what the tally
// holds, not yet applied, to the keys it lists (docs/key-service.md). Any service sharing the store may add
// to it; any replica that delivers it delivers every field.

const WIRE_KINDS: Record<LimitHitKind, LimitKind> = {
  rate: LimitKind.RATE,
  concurrency: LimitKind.CONCURRENCY,
  spend_cap: LimitKind.SPEND_CAP,
  session_opens: LimitKind.SESSION_OPENS,
};

export interface LimitHitDeliverySettings {
  /** Who claims the batches: one id per replica. */
  readonly claimant: string;
  /** How long a claimed batch is kept from other replicas; outlasts one key-service call. */
  readonly claimTtlMs: number;
  /** Most entries (keys × limits) per batch, so one call stays well under gRPC's message limit. */
  readonly maxEntries: number;
  /** Most batches one delivery sends; the rest wait for the next one. */
  readonly maxBatches: number;
}

/**
 * Moves the tally's counts to the key-service: claims a batch (the one sealed before, or the open counts
 * sealed now), sends it as one RecordLimitHits call under its batch id, and acknowledges it once the
 * key-service has counted it. A failed call leaves the batch in the store for the next delivery (by this
 * replica or, after the claim lapses, any other); the key-service counts a batch id once, so a retry after
 * a lost answer adds nothing. A batch the key-service refuses as invalid is dropped (a retry could not
 * help). Returns how many batches were handed over.
 */
export async function deliverLimitHits(
  tallies: Tallies,
  keyService: KeyServiceClient,
  settings: LimitHitDeliverySettings,
  logger: Logger,
): Promise<number> {
  let delivered = 0;
  while (delivered < settings.maxBatches) {
    const batch = await tallies.claim(LIMIT_HITS_TALLY, settings.claimant, {
      claimTtlMs: settings.claimTtlMs,
      maxFields: settings.maxEntries,
    });
    if (batch === null) break;
    try {
      await keyService.recordLimitHits({ batchId: batch.batchId, hits: hitsOf(batch, logger) });
    } catch (error) {
      if (!(error instanceof RpcError && error.appCode === 'invalid_request')) {
        logger.warn(
          { err: error, batchId: batch.batchId },
          'could not deliver limit hits; retrying at the next flush',
        );
        break;
      }
      // Refused now, refused on every retry, and holding up every batch after it: dropped, loudly.
      logger.error(
        { err: error, batchId: batch.batchId, counts: batch.counts },
        'the key-service refused a batch of limit hits; dropping it',
      );
    }
    await tallies.acknowledge(LIMIT_HITS_TALLY, batch.batchId);
    delivered += 1;
  }
  return delivered;
}

function hitsOf(batch: TallyBatch, logger: Logger) {
  const hits = [];
  for (const [field, count] of Object.entries(batch.counts)) {
    const separator = field.indexOf(':');
    const kind = WIRE_KINDS[field.slice(0, separator) as LimitHitKind] as LimitKind | undefined;
    if (separator < 0 || kind === undefined) {
      // A field this gateway cannot read (a newer writer's kind) would fail the whole batch forever.
      logger.warn({ field, batchId: batch.batchId }, 'dropping a limit-hit count of an unknown kind');
      continue;
    }
    hits.push({ keyId: field.slice(separator + 1), kind, count });
  }
  return hits;
}
