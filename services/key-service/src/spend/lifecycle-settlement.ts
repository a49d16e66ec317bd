import { isAppError, type Logger, type ReceivedEvent } from '@svc/platform';
import {
  JobLifecycleKind,
  PaymentPath,
  type JobLifecycleEvent,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { parseWei } from '../money/wei.js';
import type { SpendLedger } from './spend-ledger.js';

/**
 * Kinds that say the call's job is alive: each keeps the hold from lapsing before its job ends.
 * `diverged` is one of them: the job is Completed on chain, so the wallet pays unless it is refunded;
 * the hold stays until `refunded` releases it or `answered` (at the job's release) counts it as spent.
 */
const LIVE_JOB_KINDS = new Set([
  JobLifecycleKind.REQUESTED,
  JobLifecycleKind.SESSION_OPENED,
  JobLifecycleKind.SESSION_CLAIMED,
  JobLifecycleKind.SUBMITTED,
  JobLifecycleKind.REASSIGNED,
  JobLifecycleKind.COMPLETED,
  JobLifecycleKind.DIVERGED,
]);

/**
 * Settles spend reservations from job lifecycle events, so the reservation of a call whose gateway died
 * still ends right: `answered` commits at the fee charged, `failed` releases, `refunded` leaves nothing
 * spent (it takes back a commit made when a fast-path answer was delivered), and the kinds of a live job
 * (`diverged` among them: its job is Completed on chain) keep the hold from lapsing meanwhile. Idempotent:
 * a redelivered event changes nothing (the first commit wins; a release after a commit is a no-op; a commit
 * after a release still counts the fee as spent; nothing counts after a refund). Events about reservations
 * this service does not hold (per-call payments) are ignored.
 */
export function lifecycleSettlementHandler(ledger: SpendLedger, logger: Logger) {
  return async (event: ReceivedEvent<JobLifecycleEvent>): Promise<void> => {
    const { kind, reservationId, feeWei, paymentPath, keyId } = event.message;
    // A call paid per call without a key is keyed by the payment-settler's reservation, not one of ours.
    if (!reservationId || (paymentPath === PaymentPath.PREPAID_DEBIT && !keyId)) return;
    if (LIVE_JOB_KINDS.has(kind)) {
      await ledger.extend(reservationId);
      return;
    }
    const settle = {
      [JobLifecycleKind.ANSWERED]: () =>
        ledger.commit(reservationId, feeWei ? parseWei(feeWei.decimal, 'fee_wei') : undefined, 'event'),
      [JobLifecycleKind.FAILED]: () => ledger.release(reservationId, 'event'),
      [JobLifecycleKind.REFUNDED]: () => ledger.refund(reservationId, 'event'),
    }[kind as number];
    if (!settle) return;
    try {
      const state = await settle();
      logger.debug(
        { reservationId, kind: JobLifecycleKind[kind], state },
        'settled a reservation from an event',
      );
    } catch (error) {
      // A domain refusal (unknown reservation, a fee above the hold) will not change on a retry; an outage will.
      if (!isAppError(error)) throw error;
      logger.warn(
        { err: error, reservationId, eventId: event.eventId, kind: JobLifecycleKind[kind] },
        'lifecycle event settles no reservation',
      );
    }
  };
}
