import { randomUUID } from 'node:crypto';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { jobLifecycleTopic, type EventBus, type Logger } from '@svc/platform';
import {
  JobLifecycleEventSchema,
  JobLifecycleKind,
  PaymentPath,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';

/** What every event of one call repeats: who pays, for which key and model, under which reservation. */
export interface CallIdentity {
  readonly reservationId: string;
  readonly requestId: string;
  readonly paymentPath: 'delegate' | 'prepaid_debit';
  readonly payer: string;
  readonly keyId: string;
  readonly model: string;
  readonly paymentReservationId?: string;
}

/** The step-specific fields of an event. */
export interface LifecycleStep {
  readonly sessionId?: bigint;
  readonly jobId?: bigint;
  readonly attempt?: number;
  readonly txHash?: string;
  readonly worker?: string;
  readonly feeWei?: bigint;
  readonly failureCode?: string;
  readonly occurredAt?: Date;
}

export { JobLifecycleKind };

/**
 * Publishes `svc.job-lifecycle.v1` events for one call (docs/events.md). A publish that fails is
 * retried a few times and then logged: the key-service's reservation TTL is the last resort, and a
 * completion is never failed because the bus hiccupped.
 */
export class LifecyclePublisher {
  constructor(
    private readonly bus: EventBus,
    private readonly logger: Logger,
  ) {}

  async publish(call: CallIdentity, kind: JobLifecycleKind, step: LifecycleStep = {}): Promise<void> {
    const init: MessageInitShape<typeof JobLifecycleEventSchema> = {
      eventId: randomUUID(),
      occurredAt: timestampFromDate(step.occurredAt ?? new Date()),
      reservationId: call.reservationId,
      kind,
      requestId: call.requestId,
      paymentPath: call.paymentPath === 'delegate' ? PaymentPath.DELEGATE : PaymentPath.PREPAID_DEBIT,
      payer: { hex: call.payer },
      keyId: call.keyId,
      model: call.model,
      sessionId: step.sessionId?.toString() ?? '',
      jobId: step.jobId?.toString() ?? '',
      attempt: step.attempt ?? 0,
      failureCode: step.failureCode ?? '',
      paymentReservationId: call.paymentReservationId ?? '',
      ...(step.txHash ? { txHash: { hex: step.txHash.toLowerCase() } } : {}),
      ...(step.worker ? { worker: { hex: step.worker } } : {}),
      ...(step.feeWei !== undefined ? { feeWei: { decimal: step.feeWei.toString() } } : {}),
    };
    const message = create(JobLifecycleEventSchema, init);
    for (let attempt = 1; ; attempt++) {
      try {
        await this.bus.publish(jobLifecycleTopic, message, { requestId: call.requestId });
        return;
      } catch (error) {
        if (attempt >= 3) {
          this.logger.error(
            {
              err: error,
              kind: JobLifecycleKind[kind],
              reservationId: call.reservationId,
              jobId: init.jobId,
            },
            'job lifecycle event not published',
          );
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 100 * attempt));
      }
    }
  }
}
