import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import kafkajs, { type EachMessagePayload } from 'kafkajs';
import { decodeRecord, type DecodedEvent } from '../codec.js';
import { deliverWithRetry, type EventBusLogger } from '../delivery.js';
import type { EventHandler } from '../event-bus.js';
import type { RetryPolicy } from '../retry-policy.js';
import type { EventTopic } from '../topic.js';
import { fromKafkaMessage } from './kafka-record.js';

const { KafkaJSError } = kafkajs;

export interface MessageHandlerContext {
  readonly group: string;
  readonly retry: RetryPolicy;
  readonly logger: EventBusLogger;
  /** Aborted when the subscription closes or this consumer stopped for good (a crash it is not restarted from). */
  readonly signal: AbortSignal;
  /** How often a handler waiting to retry heartbeats: the consumer's heartbeat interval. */
  readonly heartbeatIntervalMs: number;
}

/**
 * The kafkajs `eachMessage` callback of one subscription. kafkajs marks a record consumed (and commits
 * it) only when this resolves, so it resolves only once the handler has succeeded; a failing handler
 * is retried here, heartbeating while it waits so the member keeps its partitions.
 */
export function kafkaMessageHandler<Desc extends DescMessage>(
  topic: EventTopic<Desc>,
  handler: EventHandler<MessageShape<Desc>>,
  context: MessageHandlerContext,
): (payload: EachMessagePayload) => Promise<void> {
  return async ({ partition, message, heartbeat }) => {
    let event: DecodedEvent<MessageShape<Desc>>;
    try {
      event = decodeRecord(topic, fromKafkaMessage(topic.name, message));
    } catch (error) {
      // Retrying cannot make a foreign or corrupt record parse; holding the partition would stop every other key.
      context.logger.error(
        { err: error, topic: topic.name, group: context.group, partition, offset: message.offset },
        'skipping a record that cannot be decoded',
      );
      return;
    }
    // A heartbeat that finds the group rebalancing throws; kafkajs then rejoins and, since this record
    // was not acknowledged, the partition's next owner starts from it.
    const acknowledged = await deliverWithRetry(handler, event, {
      ...context,
      keepAlive: heartbeat,
      keepAliveIntervalMs: context.heartbeatIntervalMs,
    });
    if (!acknowledged) {
      // A KafkaJSError tells kafkajs this is its own kind of stop, not a handler bug to log and restart on.
      throw new KafkaJSError(`${topic.name}: consumer stopped before event ${event.eventId} was handled`, {
        retriable: true,
      });
    }
  };
}
