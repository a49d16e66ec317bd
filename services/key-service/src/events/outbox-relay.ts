import { fromBinary } from '@bufbuild/protobuf';
import { type EventBus, keyEventsTopic, type Logger } from '@svc/platform';
import { KeyEventSchema } from '@svc/proto/gen/svc/events/v1/key_event_pb';
import { PeriodicTask } from '../background/periodic-task.js';
import { inTransaction, type PrismaClient } from '../db/database.js';
import type { OutboxBacklog } from '../observability/key-service-metrics.js';

/** Lock that makes one relay pass at a time across replicas (second half of the two-int lock key). */
const RELAY_LOCK = [0x6b657973, 1] as const;

export interface OutboxRelaySettings {
  readonly pollIntervalMs: number;
  readonly batchSize: number;
}

/**
 * Publishes committed key events from the outbox in commit order and marks them published. One pass at
 * a time across all replicas (a transaction-scoped advisory lock; others skip their turn), so events of
 * one wallet (written under that wallet's lock, hence in sequence order) reach the bus in order.
 * At-least-once: a pass that dies after publishing, or whose publish timed out, leaves its rows
 * unpublished and the next pass publishes them again under the same event ids. A timed-out send may
 * still land; the bus sends the next batch of the topic only once it has settled (on this replica), so a
 * repeat lands after its original, possibly after later events of its wallet, never before an earlier
 * one. The gateway's eviction is idempotent and order-free, so a repeat costs one key lookup.
 */
export class OutboxRelay {
  readonly #task: PeriodicTask;

  constructor(
    private readonly db: PrismaClient,
    private readonly bus: EventBus,
    private readonly settings: OutboxRelaySettings,
    private readonly logger: Logger,
  ) {
    this.#task = new PeriodicTask('outbox-relay', settings.pollIntervalMs, () => this.drain(), logger);
  }

  start(): void {
    this.#task.start();
  }

  /** Publishes soon: called after a change commits, so events do not wait for the next poll. */
  wake(): void {
    this.#task.wake();
  }

  stop(): Promise<void> {
    return this.#task.stop();
  }

  /** Deletes events published more than `retentionMs` ago (the bus keeps the audit trail). */
  prunePublished(retentionMs: number): Promise<number> {
    return this.db.$executeRaw`
      DELETE FROM key_event_outbox
      WHERE published_at IS NOT NULL AND published_at < now() - ${retentionMs} * interval '1 millisecond'`;
  }

  /** The events not yet published (read through the outbox's pending index). */
  async backlog(): Promise<OutboxBacklog> {
    const [row] = await this.db.$queryRaw<Array<{ pending: number; oldest_age_seconds: number | null }>>`
      SELECT count(*)::int AS pending,
             extract(epoch FROM now() - min(created_at))::float8 AS oldest_age_seconds
      FROM key_event_outbox WHERE published_at IS NULL`;
    return { pending: row?.pending ?? 0, oldestAgeSeconds: Math.max(0, row?.oldest_age_seconds ?? 0) };
  }

  /** Publishes everything pending now. */
  async drain(): Promise<void> {
    while ((await this.publishBatch()) === this.settings.batchSize);
  }

  /** One pass; returns how many events it published (0 when another replica holds the turn). */
  async publishBatch(): Promise<number> {
    return inTransaction(this.db, async (tx) => {
      const [turn] = await tx.$queryRaw<Array<{ locked: boolean }>>`
        SELECT pg_try_advisory_xact_lock(${RELAY_LOCK[0]}::int4, ${RELAY_LOCK[1]}::int4) AS locked`;
      if (!turn?.locked) return 0;
      const pending = await tx.keyEventOutbox.findMany({
        where: { publishedAt: null },
        orderBy: { sequence: 'asc' },
        take: this.settings.batchSize,
        select: { sequence: true, payload: true, requestId: true },
      });
      if (pending.length === 0) return 0;
      await this.bus.publishBatch(
        keyEventsTopic,
        pending.map((row) => ({
          message: fromBinary(KeyEventSchema, row.payload),
          requestId: row.requestId ?? undefined,
        })),
      );
      await tx.keyEventOutbox.updateMany({
        where: { sequence: { in: pending.map((row) => row.sequence) } },
        data: { publishedAt: new Date() },
      });
      this.logger.debug({ published: pending.length }, 'published key events');
      return pending.length;
    });
  }
}
