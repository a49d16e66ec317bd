import { randomUUID } from 'node:crypto';
import {
  RetriedSubscription,
  SUBSCRIBE_RETRY,
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
export function evictOnKeyEvents(
  feed: KeyEventFeed,
  cache: KeyResolutionCache,
  logger: Logger,
  retry: RetryPolicy = SUBSCRIBE_RETRY,
): Promise<EventSubscription> {
  const handler = keyEventEvictionHandler(cache, logger);
  const group = keyEventGroupOf(feed.groupPrefix);
  return new RetriedSubscription(
    feed.bus,
    feed.topic,
    { group, handler },
    { logger, retry, meanwhile: 'the key cache is off meanwhile' },
  ).subscribed;
}
