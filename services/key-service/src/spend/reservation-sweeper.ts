import type { Logger } from '@svc/platform';
import { PeriodicTask } from '../background/periodic-task.js';
import type { OutboxRelay } from '../events/outbox-relay.js';
import type { LimitHits } from '../keys/limit-hits.js';
import type { SpendLedger } from './spend-ledger.js';

const SWEEP_BATCH = 500;

export interface ReservationSweeperSettings {
  readonly intervalMs: number;
  readonly limitHitReportRetentionMs: number;
  readonly publishedEventRetentionMs: number;
}

/**
 * Releases reservations whose TTL passed with nobody settling them (a gateway that died, an `answered`
 * event that never came), and prunes old limit-hit request ids and published outbox rows. Safe with every
 * replica sweeping.
 */
export function createReservationSweeper(
  ledger: SpendLedger,
  limitHits: LimitHits,
  relay: OutboxRelay,
  settings: ReservationSweeperSettings,
  logger: Logger,
): PeriodicTask {
  return new PeriodicTask(
    'reservation-sweeper',
    settings.intervalMs,
    async () => {
      let released = 0;
      for (;;) {
        const batch = await ledger.releaseLapsed(SWEEP_BATCH);
        released += batch;
        if (batch < SWEEP_BATCH) break;
      }
      if (released > 0) logger.info({ released }, 'released lapsed spend reservations');
      await limitHits.pruneReports(settings.limitHitReportRetentionMs);
      await relay.prunePublished(settings.publishedEventRetentionMs);
    },
    logger,
  );
}
