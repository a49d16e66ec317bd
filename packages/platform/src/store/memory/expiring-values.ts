import type { ExpiringValues } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import { ExpiringMap, type MemoryContext } from './memory-context.js';

export class MemoryExpiringValues implements ExpiringValues {
  readonly #values = new ExpiringMap<string>();

  constructor(private readonly context: MemoryContext) {}

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    requireKey('key', key);
    requirePositiveInteger('ttlMs', ttlMs);
    this.context.assertOpen('values.set');
    this.#values.set(key, value, this.context.now() + ttlMs);
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    requireKey('key', key);
    requirePositiveInteger('ttlMs', ttlMs);
    this.context.assertOpen('values.setIfAbsent');
    const now = this.context.now();
    if (this.#values.get(key, now) !== undefined) return false;
    this.#values.set(key, value, now + ttlMs);
    return true;
  }

  async get(key: string): Promise<string | null> {
    requireKey('key', key);
    this.context.assertOpen('values.get');
    return this.#values.get(key, this.context.now()) ?? null;
  }

  async take(key: string): Promise<string | null> {
    requireKey('key', key);
    this.context.assertOpen('values.take');
    const value = this.#values.get(key, this.context.now());
    if (value === undefined) return null;
    this.#values.delete(key);
    return value;
  }

  async delete(key: string): Promise<boolean> {
    requireKey('key', key);
    this.context.assertOpen('values.delete');
    return this.#values.get(key, this.context.now()) !== undefined && this.#values.delete(key);
  }

  async compareAndDelete(key: string, expected: string): Promise<boolean> {
    requireKey('key', key);
    this.context.assertOpen('values.compareAndDelete');
    if (this.#values.get(key, this.context.now()) !== expected) return false;
    return this.#values.delete(key);
  }

  sweep(now: number): void {
    this.#values.sweep(now);
  }
}
