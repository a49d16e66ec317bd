import type { QueuedEntry, QueueEntryId, Queues } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import type { MemoryContext } from './memory-context.js';

/** Queues as ordered maps; ids count up per store, so they order like pushes, as Redis stream ids do. */
export class MemoryQueues implements Queues {
  readonly #queues = new Map<string, Map<QueueEntryId, Uint8Array>>();
  #lastId = 0;

  constructor(private readonly context: MemoryContext) {}

  async push(queue: string, payload: Uint8Array, maxLength?: number): Promise<QueueEntryId | null> {
    requireKey('queue', queue);
    if (maxLength !== undefined) requirePositiveInteger('maxLength', maxLength);
    this.context.assertOpen('queues.push');
    const entries = this.#queues.get(queue) ?? new Map<QueueEntryId, Uint8Array>();
    if (maxLength !== undefined && entries.size >= maxLength) return null;
    this.#lastId += 1;
    const id = String(this.#lastId);
    entries.set(id, Uint8Array.from(payload));
    this.#queues.set(queue, entries);
    return id;
  }

  async peek(queue: string, count: number): Promise<QueuedEntry[]> {
    requireKey('queue', queue);
    requirePositiveInteger('count', count);
    this.context.assertOpen('queues.peek');
    const head: QueuedEntry[] = [];
    for (const [id, payload] of this.#queues.get(queue) ?? []) {
      if (head.length === count) break;
      head.push({ id, payload: Uint8Array.from(payload) });
    }
    return head;
  }

  async remove(queue: string, ids: readonly QueueEntryId[]): Promise<number> {
    requireKey('queue', queue);
    this.context.assertOpen('queues.remove');
    const entries = this.#queues.get(queue);
    if (!entries) return 0;
    const removed = ids.filter((id) => entries.delete(id)).length;
    if (entries.size === 0) this.#queues.delete(queue);
    return removed;
  }

  async length(queue: string): Promise<number> {
    requireKey('queue', queue);
    this.context.assertOpen('queues.length');
    return this.#queues.get(queue)?.size ?? 0;
  }
}
