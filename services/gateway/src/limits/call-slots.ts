import { AppError, renewWhileHeld, type ConcurrencyLeases, type Logger } from '@svc/platform';

export interface CallSlotSettings {
  /** Who holds the slots, for the refusal's message: "key", "payer". */
  readonly holder: string;
  readonly limit: number;
  /** Lifetime of a slot nobody renews: how long a crashed replica's calls keep their slots. */
  readonly leaseTtlMs: number;
  /**
   * Told of each refusal (an API key's is counted in its `limitHits`); the refusal is answered once it
   * settles. Must not throw or reject.
   */
  onRefused?(holderId: string): Promise<void> | void;
}

/** One in-flight call's slot; release it in the call's `finally`. */
export interface CallSlot {
  /** Idempotent; never throws (a slot that could not be released frees itself at its TTL). */
  release(): Promise<void>;
}

/**
 * Limit of calls in flight per holder (an API key, a per-call payer), as counted leases in the shared store
 * (so it holds over replicas). A slot is renewed while its call runs, so its TTL can stay short and a
 * crashed replica's slots heal soon. Holders of different kinds need ids that cannot collide.
 */
export class CallSlots {
  constructor(
    private readonly leases: ConcurrencyLeases,
    private readonly settings: CallSlotSettings,
    private readonly logger: Logger,
  ) {}

  /** Takes a slot for the holder, or throws 429 `concurrency_limit_exceeded`. */
  async acquire(holderId: string): Promise<CallSlot> {
    const { holder, limit, leaseTtlMs } = this.settings;
    const leaseKey = `gateway:v1:in-flight:${holderId}`;
    const outcome = await this.leases.acquire(leaseKey, limit, leaseTtlMs);
    if (!outcome.granted) {
      await this.settings.onRefused?.(holderId);
      throw new AppError('concurrency_limit_exceeded', {
        message: `Too many calls in flight for this ${holder}: at most ${limit} at once.`,
        // A release may free a slot any moment; the store's figure is only when the oldest lease would expire.
        retryAfterSeconds: Math.min(1, outcome.retryAfterMs / 1000),
      });
    }
    const { leaseId } = outcome;
    const renewal = renewWhileHeld(leaseTtlMs, () =>
      this.leases.renew(leaseKey, leaseId, leaseTtlMs).then(
        (live) => {
          if (!live) this.logger.warn({ holderId }, 'an in-flight slot expired before its call ended');
        },
        (error: unknown) => this.logger.warn({ err: error, holderId }, 'could not renew an in-flight slot'),
      ),
    );
    let released: Promise<void> | undefined;
    return {
      release: () => {
        released ??= (async () => {
          renewal.stop();
          try {
            await this.leases.release(leaseKey, leaseId);
          } catch (error) {
            this.logger.warn(
              { err: error, holderId },
              'could not release an in-flight slot; it expires at its TTL',
            );
          }
        })();
        return released;
      },
    };
  }
}
