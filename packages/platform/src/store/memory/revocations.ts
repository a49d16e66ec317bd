import type { MarkerHitOutcome, MarkerHitWindows, RevocationMarkers } from '../store.js';
import { requireKey } from '../validation.js';
import type { MemoryContext } from './memory-context.js';
import { requireRateWindowHit, type MemoryRateWindows } from './rate-windows.js';

export class MemoryRevocationMarkers implements RevocationMarkers {
  readonly #marked = new Set<string>();

  constructor(
    private readonly context: MemoryContext,
    private readonly rateWindows: MemoryRateWindows,
  ) {}

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

  async hitByMarker(id: string, windows: MarkerHitWindows): Promise<MarkerHitOutcome> {
    requireKey('id', id);
    requireRateWindowHit(windows.ifClear);
    requireRateWindowHit(windows.ifMarked);
    this.context.assertOpen('revocations.hitByMarker');
    const marked = this.#marked.has(id);
    const { key, limit, windowMs } = marked ? windows.ifMarked : windows.ifClear;
    return { marked, verdict: this.rateWindows.hitNow(key, limit, windowMs) };
  }
}
