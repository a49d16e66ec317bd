import { StoreCommandError } from '../errors.js';
import type { CounterIncrementOptions, Counters } from '../store.js';
import { fitsInt64, requireKey, requirePositiveInteger, toCounterIncrement } from '../validation.js';
import { ExpiringMap, type MemoryContext } from './memory-context.js';

export class MemoryCounters implements Counters {
  readonly #records = new ExpiringMap<Map<string, bigint>>();

  constructor(private readonly context: MemoryContext) {}

  async increment(
    key: string,
    field: string,
    by: bigint | number = 1n,
    options: CounterIncrementOptions = {},
  ): Promise<bigint> {
    requireKey('key', key);
    requireKey('field', field);
    const amount = toCounterIncrement(by);
    if (options.ttlMs !== undefined) requirePositiveInteger('ttlMs', options.ttlMs);
    this.context.assertOpen('counters.increment');
    const now = this.context.now();
    const record = this.#records.entry(key, now);
    const fields = record?.value ?? new Map<string, bigint>();
    const value = (fields.get(field) ?? 0n) + amount;
    // Same refusal as Redis HINCRBY: an overflowing increment changes nothing.
    if (!fitsInt64(value)) {
      throw new StoreCommandError('counters.increment', 'increment or decrement would overflow');
    }
    fields.set(field, value);
    let expiresAtMs = record?.expiresAtMs ?? null;
    if (expiresAtMs === null && options.ttlMs !== undefined) expiresAtMs = now + options.ttlMs;
    this.#records.set(key, fields, expiresAtMs);
    return value;
  }

  async get(key: string): Promise<Record<string, bigint>> {
    requireKey('key', key);
    this.context.assertOpen('counters.get');
    return Object.fromEntries(this.#records.get(key, this.context.now()) ?? []);
  }

  async delete(key: string): Promise<boolean> {
    requireKey('key', key);
    this.context.assertOpen('counters.delete');
    return this.#records.get(key, this.context.now()) !== undefined && this.#records.delete(key);
  }

  sweep(now: number): void {
    this.#records.sweep(now);
  }
}
