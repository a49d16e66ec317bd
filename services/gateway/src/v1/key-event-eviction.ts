import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  EventBusClosedError,
  retryDelayMs,
  type EventBus,
  type EventHandler,
  type EventSubscription,
  type EventTopic,
  type Logger,
  type RetryPolicy,
} from '@svc/platform';
import { KeyEventKind, type KeyEvent, type KeyEventSchema } from '@svc/proto/gen/svc/events/v1/key_event_pb';
import type { KeyResolutionCache } from './key-resolution-cache.js';

/** Where key changes are published: the bus and the key-service's key-events topic. */
export interface KeyEventFeed {
  readonly bus: EventBus;
  readonly topic: EventTopic<typeof KeyEventSchema>;
  /** Consumer group prefix; each replica subscribes under its own group. */
  readonly groupPrefix: string;
}

// A minted key has nothing cached yet; every other change makes a cached resolution stale.
const EVICTING_KINDS = new Set([KeyEventKind.REVOKED, KeyEventKind.DELETED, KeyEventKind.CAP_CHANGED]);

/** Backoff between attempts to subscribe while the brokers cannot be reached. */
const SUBSCRIBE_RETRY: RetryPolicy = {
  initialDelayMs: 1_000,
  maxDelayMs: 30_000,
  multiplier: 2,
  jitter: 0.2,
};

/** The consumer group of one replica's eviction consumer: the prefix and a random suffix. */
export function keyEventGroupOf(groupPrefix: string): string {
  return `${groupPrefix}-${randomUUID()}`;
}

/**
 * Evicts the key an event names from the cache. Idempotent and order-free: an eviction only makes the
 * next call resolve the key at the key-service, so a redelivered, duplicated or late event costs one
 * lookup and nothing else (and a lookup that raced an eviction is not cached, see KeyResolutionCache).
 */
export function keyEventEvictionHandler(cache: KeyResolutionCache, logger: Logger): EventHandler<KeyEvent> {
  return async ({ message }) => {
    if (!EVICTING_KINDS.has(message.kind) || message.keyId === '') return;
    cache.evict(message.keyId);
    logger.debug({ keyId: message.keyId, kind: KeyEventKind[message.kind] }, 'evicted a cached API key');
  };
}

/**
 * Evicts cached keys as their changes are published. Every replica needs every event, so each subscribes
 * under a group of its own, from the end of the topic (an entry older than the subscription expires by TTL).
 * This only shortens the life of stale entries: revocation itself is enforced by the store's marker.
 *
 * A subscription that fails (the brokers unreachable at start-up) is tried again with a backoff, so the
 * promise resolves once subscribed; it rejects only when the bus closes first. Until then, and while the
 * consumer is not live, the gateway's cache is off (see buildGatewayApp); a consumer that dies also shows
 * in the bus's health, which the runner's readiness reports.
 */
export async function evictOnKeyEvents(
  feed: KeyEventFeed,
  cache: KeyResolutionCache,
  logger: Logger,
  retry: RetryPolicy = SUBSCRIBE_RETRY,
): Promise<EventSubscription> {
  const handler = keyEventEvictionHandler(cache, logger);
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await feed.bus.subscribe(feed.topic, { group: keyEventGroupOf(feed.groupPrefix), handler });
    } catch (error) {
      if (error instanceof EventBusClosedError) throw error;
      const retryInMs = retryDelayMs(retry, attempt);
      logger.warn(
        { err: error, topic: feed.topic.name, attempt, retryInMs },
        'could not subscribe to key events; trying again (the key cache is off meanwhile)',
      );
      // Not holding the process open: a stopping gateway does not wait for the next attempt.
      await sleep(retryInMs, undefined, { ref: false });
    }
  }
}
