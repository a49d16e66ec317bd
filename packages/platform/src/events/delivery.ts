import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { withRequestContext, type Logger } from '../logging/index.js';
import {
  REQUEST_ID_ATTRIBUTE,
  SpanKind,
  SpanStatusCode,
  startSpan,
  traceContextOf,
  withSpan,
} from '../tracing/index.js';
import type { DecodedEvent } from './codec.js';
import type { EventHandler, ReceivedEvent } from './event-bus.js';
import { retryDelayMs, type RetryPolicy } from './retry-policy.js';

export type EventBusLogger = Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>;

export const silentLogger: EventBusLogger = pino({ enabled: false });

export interface DeliveryContext {
  readonly group: string;
  readonly retry: RetryPolicy;
  readonly logger: EventBusLogger;
  /** Aborted when this consumer must stop: its subscription closes or its partition moves to another member. */
  readonly signal: AbortSignal;
  /**
   * Runs while waiting to retry (every `keepAliveIntervalMs`, and before each retry): the Kafka consumer
   * heartbeats here, so a long backoff does not cost it its group membership, and learns of a rebalance
   * by the throw.
   */
  readonly keepAlive?: () => Promise<void>;
  readonly keepAliveIntervalMs?: number;
}

/**
 * Runs the handler until it succeeds (true) or the consumer has to stop first (false: the event stays
 * unacknowledged, so it is delivered again, to this group, before anything later of its key).
 */
export async function deliverWithRetry<M>(
  handler: EventHandler<M>,
  event: DecodedEvent<M>,
  context: DeliveryContext,
): Promise<boolean> {
  for (let attempt = 1; ; attempt += 1) {
    if (context.signal.aborted) return false;
    try {
      await handleInSpan(handler, { ...event, attempt }, context.group);
      return true;
    } catch (error) {
      const retryInMs = retryDelayMs(context.retry, attempt);
      context.logger.warn(
        {
          err: error,
          topic: event.topic,
          group: context.group,
          eventId: event.eventId,
          eventKey: event.key,
          requestId: event.requestId,
          attempt,
          retryInMs,
        },
        'event handler failed; retrying the event',
      );
      await waitToRetry(retryInMs, context);
    }
  }
}

/**
 * One handling of an event, in a consumer span that continues the publisher's trace, and in the request
 * context of the call that caused it.
 */
async function handleInSpan<M>(
  handler: EventHandler<M>,
  event: ReceivedEvent<M>,
  group: string,
): Promise<void> {
  const span = startSpan(`process ${event.topic}`, {
    kind: SpanKind.CONSUMER,
    parent: traceContextOf(event.trace ?? {}),
    attributes: {
      'messaging.operation.type': 'process',
      'messaging.destination.name': event.topic,
      'messaging.consumer.group.name': group,
      'messaging.message.id': event.eventId,
      'svc.delivery_attempt': event.attempt,
      ...(event.requestId ? { [REQUEST_ID_ATTRIBUTE]: event.requestId } : {}),
    },
  });
  try {
    await withSpan(span, () =>
      event.requestId
        ? withRequestContext({ requestId: event.requestId }, () => handler(event))
        : handler(event),
    );
  } catch (error) {
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw error;
  } finally {
    span.end();
  }
}

async function waitToRetry(ms: number, context: DeliveryContext): Promise<void> {
  const slice = Math.max(1, context.keepAliveIntervalMs ?? ms);
  let remaining = ms;
  do {
    const step = Math.min(remaining, slice);
    await sleepUnlessAborted(step, context.signal);
    remaining -= step;
    if (context.signal.aborted) return;
    await context.keepAlive?.();
  } while (remaining > 0);
}

export async function sleepUnlessAborted(ms: number, signal: AbortSignal): Promise<void> {
  // Rejects only with the abort, which ends the sleep early by design.
  await sleep(ms, undefined, { signal }).catch(() => undefined);
}
