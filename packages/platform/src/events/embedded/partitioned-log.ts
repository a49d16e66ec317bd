import type { EventRecord } from '../codec.js';

export interface StoredEvent {
  readonly offset: number;
  readonly record: EventRecord;
  readonly publishedAt: Date;
}

interface Partition {
  /** Offset of events[0]; rises as retention drops the oldest events. */
  startOffset: number;
  events: StoredEvent[];
}

/**
 * One topic's events, split into partitions by key the way Kafka does it: a key always lands in the
 * same partition, so consuming a partition in offset order keeps each key in publish order.
 */
export class PartitionedLog {
  readonly #partitions: Partition[];
  readonly #retainedPerPartition: number;

  constructor(
    readonly typeName: string,
    partitionCount: number,
    retainedPerPartition: number,
  ) {
    this.#partitions = Array.from({ length: partitionCount }, () => ({ startOffset: 0, events: [] }));
    this.#retainedPerPartition = retainedPerPartition;
  }

  get partitionCount(): number {
    return this.#partitions.length;
  }

  partitionOf(key: string): number {
    return fnv1a32(key) % this.#partitions.length;
  }

  append(record: EventRecord, publishedAt: Date): number {
    const partitionIndex = this.partitionOf(record.key);
    const partition = this.#partition(partitionIndex);
    partition.events.push({ offset: partition.startOffset + partition.events.length, record, publishedAt });
    // Trim in chunks (a tenth of the limit) so retention costs O(1) per append on average, not a shift each time.
    const excess = partition.events.length - this.#retainedPerPartition;
    if (excess > Math.max(1, Math.floor(this.#retainedPerPartition / 10))) {
      partition.events.splice(0, excess);
      partition.startOffset += excess;
    }
    return partitionIndex;
  }

  /** The first retained event at or after `offset`, if any. */
  readFrom(partitionIndex: number, offset: number): StoredEvent | undefined {
    const partition = this.#partition(partitionIndex);
    return partition.events[Math.max(0, offset - partition.startOffset)];
  }

  startOffset(partitionIndex: number): number {
    return this.#partition(partitionIndex).startOffset;
  }

  endOffset(partitionIndex: number): number {
    const partition = this.#partition(partitionIndex);
    return partition.startOffset + partition.events.length;
  }

  #partition(index: number): Partition {
    const partition = this.#partitions[index];
    if (!partition) throw new RangeError(`no partition ${index}`);
    return partition;
  }
}

// FNV-1a over UTF-16 code units: stable across processes and cheap; spread, not security, is the point.
function fnv1a32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i += 1) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
