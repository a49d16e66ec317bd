import type { Logger } from '@svc/platform';
import { LimitKind } from '@svc/proto/gen/svc/key/v1/api_key_pb';
import type { KeyServiceClient } from '../key-service-client.js';

export type KeyLimit = 'rate' | 'concurrency' | 'spendCap';

const LIMIT_KINDS: Record<KeyLimit, LimitKind> = {
  rate: LimitKind.RATE,
  concurrency: LimitKind.CONCURRENCY,
  spendCap: LimitKind.SPEND_CAP,
};

/**
 * Counts refusals in the key's `limitHits` (spec: each refusal increments the matching counter). Reports
 * go out without holding up the refusal; a failed report is logged, never answered to the caller. Each
 * report names the refused call, so the key-service counts a repeated report once.
 */
export class LimitHitReporter {
  readonly #pending = new Set<Promise<void>>();

  constructor(
    private readonly keyService: KeyServiceClient,
    private readonly logger: Logger,
  ) {}

  report(keyId: string, limit: KeyLimit, callId: string): void {
    const sent = this.keyService
      .recordLimitHit({ keyId, kind: LIMIT_KINDS[limit], requestId: callId })
      .then(
        () => undefined,
        (error: unknown) => this.logger.warn({ err: error, keyId, limit }, 'could not record a limit hit'),
      )
      .finally(() => this.#pending.delete(sent));
    this.#pending.add(sent);
  }

  /** Resolves once every report sent so far has settled (shutdown, tests). */
  async flush(): Promise<void> {
    await Promise.all([...this.#pending]);
  }
}
