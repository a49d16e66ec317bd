import { AppError, type Logger } from '@svc/platform';
import { SpendReservationState } from '@svc/proto/gen/svc/key/v1/spend_reservation_pb';
import type { KeyServiceClient } from '../key-service-client.js';
import type {
  GatewayMetrics,
  SettlementAction,
  SettlementOutcome,
} from '../observability/gateway-metrics.js';
import type { ResolvedApiKey } from './key-resolution-cache.js';
import type { LimitHitReporter } from './limit-hit-reporter.js';

/** A call's fee held against its key's spend cap, settled exactly once by the call. */
export interface SpendReservation {
  readonly reservationId: string;
  readonly amountWei: bigint;
  /** Counts the fee actually charged as spent (the call was answered). */
  commit(chargedWei: bigint): Promise<void>;
  /** Gives the fee back: only when no job was submitted for the call. A no-op after a commit. */
  release(): Promise<void>;
}

/**
 * Spend reservations through the key-service: reserved before a job runs, atomically with the key's other
 * calls, so concurrent calls never pass the cap together. Every settlement's outcome is counted; one that
 * fails, or a commit that does not come back COMMITTED, is logged: the job's lifecycle events (or the
 * reservation's TTL) settle it in the key-service.
 */
export class SpendReservations {
  constructor(
    private readonly keyService: KeyServiceClient,
    private readonly limitHits: LimitHitReporter,
    private readonly ttlMs: number,
    private readonly metrics: GatewayMetrics,
    private readonly logger: Logger,
  ) {}

  /** Holds `amountWei` for the call, or throws 402 `spend_cap_exceeded` with the cap. */
  async reserve(key: ResolvedApiKey, amountWei: bigint, callId: string): Promise<SpendReservation> {
    const answer = await this.keyService.reserveSpend({
      keyId: key.keyId,
      amountWei: { decimal: amountWei.toString() },
      ttl: { seconds: BigInt(Math.ceil(this.ttlMs / 1000)) },
      requestId: callId,
    });
    if (answer.outcome.case === 'refused') {
      await this.limitHits.report(key.keyId, 'spendCap');
      const cap = answer.outcome.value.spendCapWei?.decimal ?? key.spendCapWei?.toString() ?? null;
      throw new AppError('spend_cap_exceeded', {
        message: `This call's fee would pass the key's lifetime spend cap of ${cap ?? 'unknown'} wei. Raise or remove the cap.`,
        fields: { spend_cap_wei: cap },
      });
    }
    if (answer.outcome.case !== 'reserved')
      throw new Error('key-service answered ReserveSpend with no outcome');
    return this.#settleable(key.keyId, answer.outcome.value.reservationId, amountWei);
  }

  #settleable(keyId: string, reservationId: string, amountWei: bigint): SpendReservation {
    let settled: Promise<void> | undefined;
    const settleOnce = (
      action: SettlementAction,
      settle: () => Promise<{ state: SpendReservationState }>,
    ) => {
      settled ??= settle().then(
        ({ state }) => {
          const outcome = outcomeOf(state);
          this.metrics.spendSettled(action, outcome);
          if (action === 'commit' && outcome !== 'committed')
            this.logger.error(
              { keyId, reservationId, state: outcome },
              'a spend commit did not come back COMMITTED',
            );
        },
        (error: unknown) => {
          this.metrics.spendSettled(action, 'error');
          this.logger.error({ err: error, keyId, reservationId }, `could not ${action} a spend reservation`);
        },
      );
      return settled;
    };
    return {
      reservationId,
      amountWei,
      commit: (chargedWei) =>
        settleOnce('commit', () =>
          this.keyService.commitSpend({ reservationId, chargedWei: { decimal: chargedWei.toString() } }),
        ),
      release: () => settleOnce('release', () => this.keyService.releaseSpend({ reservationId })),
    };
  }
}

function outcomeOf(state: SpendReservationState): SettlementOutcome {
  switch (state) {
    case SpendReservationState.COMMITTED:
      return 'committed';
    case SpendReservationState.RELEASED:
      return 'released';
    case SpendReservationState.REFUNDED:
      return 'refunded';
    default:
      return 'held';
  }
}
