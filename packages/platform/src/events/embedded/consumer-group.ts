import type { EventBusLogger } from '../delivery.js';
import type { PartitionedLog, StoredEvent } from './partitioned-log.js';

/**
 * Hands one stored event to a member's handler, retrying until it is acknowledged (true) or the
 * signal says the member lost the partition (false).
 */
export type ConsumeStoredEvent = (stored: StoredEvent, signal: AbortSignal) => Promise<boolean>;

export interface GroupMember {
  readonly consume: ConsumeStoredEvent;
  readonly inFlight: Set<Promise<boolean>>;
}

interface PartitionLease {
  readonly member: GroupMember;
  readonly revoked: AbortController;
}

/**
 * One consumer group on one topic, run like Kafka runs it: each partition belongs to one live member at
 * a time and is consumed strictly in offset order, one event in flight, so a key's events are handled
 * in order; a member's departure (or a newcomer) moves partitions, and the next owner resumes at the
 * first unacknowledged offset. Progress outlives the members, as Kafka's committed offsets do.
 */
export class EmbeddedConsumerGroup {
  readonly #members: GroupMember[] = [];
  readonly #nextOffsets: number[];
  readonly #leases: (PartitionLease | undefined)[];
  readonly #draining: boolean[];
  readonly #log: PartitionedLog;
  readonly #logger: EventBusLogger;

  constructor(
    readonly name: string,
    log: PartitionedLog,
    fromBeginning: boolean,
    logger: EventBusLogger,
  ) {
    this.#log = log;
    this.#logger = logger;
    const partitions = Array.from({ length: log.partitionCount }, (_, index) => index);
    this.#nextOffsets = partitions.map((p) => (fromBeginning ? log.startOffset(p) : log.endOffset(p)));
    this.#leases = partitions.map(() => undefined);
    this.#draining = partitions.map(() => false);
  }

  join(consume: ConsumeStoredEvent): GroupMember {
    const member: GroupMember = { consume, inFlight: new Set() };
    this.#members.push(member);
    this.#rebalance();
    return member;
  }

  /** Removes the member; resolves once its in-flight deliveries have settled. */
  async leave(member: GroupMember): Promise<void> {
    const index = this.#members.indexOf(member);
    if (index < 0) return;
    this.#members.splice(index, 1);
    this.#rebalance();
    await Promise.allSettled([...member.inFlight]);
  }

  /** Wakes the owner of a partition that has received events. */
  notify(partition: number): void {
    // Never run a handler on the publisher's call stack: a broker would not either.
    setImmediate(() => this.#drain(partition));
  }

  #rebalance(): void {
    const members = this.#members;
    this.#leases.forEach((current, partition) => {
      const owner = members.length > 0 ? members[partition % members.length] : undefined;
      if (current?.member === owner) return;
      current?.revoked.abort();
      this.#leases[partition] = owner && { member: owner, revoked: new AbortController() };
      if (owner) this.notify(partition);
    });
  }

  async #drain(partition: number): Promise<void> {
    if (this.#draining[partition]) return;
    this.#draining[partition] = true;
    try {
      for (;;) {
        const lease = this.#leases[partition];
        const next = lease && this.#log.readFrom(partition, this.#nextOffsets[partition] ?? 0);
        // Checking for more work and clearing the flag happen in one synchronous step (finally), so an
        // event appended meanwhile either is seen here or finds the flag cleared and starts a new drain.
        if (!lease || !next) return;
        if (await this.#deliver(lease, next)) this.#nextOffsets[partition] = next.offset + 1;
      }
    } catch (error) {
      this.#logger.error(
        { err: error, group: this.name, partition },
        'embedded consumer stopped on an internal error',
      );
    } finally {
      this.#draining[partition] = false;
    }
  }

  async #deliver(lease: PartitionLease, stored: StoredEvent): Promise<boolean> {
    const delivery = lease.member.consume(stored, lease.revoked.signal);
    lease.member.inFlight.add(delivery);
    try {
      return await delivery;
    } finally {
      lease.member.inFlight.delete(delivery);
    }
  }
}
