import type { RevocationMarkers } from '../store.js';
import { requireKey } from '../validation.js';
import type { MemoryContext } from './memory-context.js';

export class MemoryRevocationMarkers implements RevocationMarkers {
  readonly #marked = new Set<string>();

  constructor(private readonly context: MemoryContext) {}

  async mark(id: string): Promise<void> {
    requireKey('id', id);
    this.context.assertOpen('revocations.mark');
    this.#marked.add(id);
  }

  async isMarked(id: string): Promise<boolean> {
    requireKey('id', id);
    this.context.assertOpen('revocations.isMarked');
    return this.#marked.has(id);
  }

  async markedAmong(ids: readonly string[]): Promise<Set<string>> {
    for (const id of ids) requireKey('id', id);
    this.context.assertOpen('revocations.markedAmong');
    return new Set(ids.filter((id) => this.#marked.has(id)));
  }
}
