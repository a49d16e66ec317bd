import { setTimeout as sleep } from 'node:timers/promises';
import type { Admin } from 'kafkajs';
import type { EventBusLogger } from '../delivery.js';

/** How often, and how far apart, `startNewGroupAtEnd` tries again after a transient error (~7 s in all). */
export interface NewGroupStartRetry {
  readonly attempts: number;
  readonly initialDelayMs: number;
  readonly maxDelayMs: number;
}

const DEFAULT_RETRY: NewGroupStartRetry = { attempts: 8, initialDelayMs: 100, maxDelayMs: 2_000 };

/**
 * Pins a group that has never committed on this topic to the topic's current end. Left to itself, a
 * new kafkajs consumer looks up "latest" only at its first fetch, after `subscribe` has resolved, and
 * events published in between would never reach the group.
 *
 * kafkajs's admin gives up at once on errors that a moment later are gone, and a real broker answers
 * them routinely: the group's coordinator still loading (a group's first use on a fresh cluster creates
 * `__consumer_offsets`) or moved (a broker restarted), a partition leader not serving yet (just after
 * the topic was created) or moved. Those are tried again, with the cluster metadata refreshed after a
 * leader error; anything else fails the subscription at once.
 */
export async function startNewGroupAtEnd(
  admin: Admin,
  group: string,
  topic: string,
  logger: EventBusLogger,
  retry: NewGroupStartRetry = DEFAULT_RETRY,
): Promise<void> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      await pinToEnd(admin, group, topic, logger);
      return;
    } catch (error) {
      if (!isTransient(error) || attempt >= retry.attempts) throw error;
      const delayMs = Math.min(retry.maxDelayMs, retry.initialDelayMs * 2 ** (attempt - 1));
      logger.debug(
        { err: error, topic, group, attempt, delayMs },
        'pinning a new consumer group to the topic end failed; trying again',
      );
      if (isLeaderError(error)) {
        // kafkajs keeps the stale leader until its metadata ages out; fetchTopicMetadata refreshes it.
        await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => undefined);
      }
      await sleep(delayMs);
    }
  }
}

async function pinToEnd(admin: Admin, group: string, topic: string, logger: EventBusLogger): Promise<void> {
  const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  if (committed?.partitions.some(({ offset }) => Number(offset) >= 0)) return;
  const ends = await admin.fetchTopicOffsets(topic);
  try {
    await admin.setOffsets({
      groupId: group,
      topic,
      partitions: ends.map(({ partition, offset }) => ({ partition, offset })),
    });
  } catch (error) {
    if (isTransient(error)) throw error;
    // Another member of this new group is already running (setOffsets needs an idle group); the group's
    // own start-up has placed its offsets, at most a moment earlier.
    logger.debug(
      { err: error, topic, group },
      'new consumer group is already running; not pinning its start',
    );
  }
}

/**
 * kafkajs marks `retriable` the protocol errors a retry can cure, and its connection errors. Not an
 * error wrapping them (KafkaJSNumberOfRetriesExceeded): kafkajs has retried that one for long already.
 */
function isTransient(error: unknown): boolean {
  return (error as { retriable?: unknown } | undefined)?.retriable === true;
}

const LEADER_ERRORS = new Set([
  'NOT_LEADER_FOR_PARTITION',
  'LEADER_NOT_AVAILABLE',
  'UNKNOWN_TOPIC_OR_PARTITION',
  'FENCED_LEADER_EPOCH',
  'UNKNOWN_LEADER_EPOCH',
]);

function isLeaderError(error: unknown): boolean {
  const type = (error as { type?: unknown } | undefined)?.type;
  return typeof type === 'string' && LEADER_ERRORS.has(type);
}
