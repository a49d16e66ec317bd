import { randomUUID } from 'node:crypto';
import type { EventBus, EventSubscription, EventTopic, Logger } from '@svc/platform';
import { KeyEventKind, type KeyEventSchema } from '@svc/proto/gen/svc/events/v1/key_event_pb';
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

/**
 * Evicts cached keys as their changes are published. Every replica needs every event, so each subscribes
 * under a group of its own, from the end of the topic (an entry older than the subscription expires by TTL).
 * This only shortens the life of stale entries: revocation itself is enforced by the store's marker.
 */
export function evictOnKeyEvents(
  feed: KeyEventFeed,
  cache: KeyResolutionCache,
  logger: Logger,
): Promise<EventSubscription> {
  return feed.bus.subscribe(feed.topic, {
    group: `${feed.groupPrefix}-${randomUUID()}`,
    handler: async ({ message }) => {
      if (!EVICTING_KINDS.has(message.kind) || message.keyId === '') return;
      cache.evict(message.keyId);
      logger.debug({ keyId: message.keyId, kind: KeyEventKind[message.kind] }, 'evicted a cached API key');
    },
  });
}
