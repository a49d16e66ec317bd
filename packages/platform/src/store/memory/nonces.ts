import type { NonceAllocator } from '../store.js';
import { requireKey, requireNonNegativeInteger } from '../validation.js';
import type { MemoryContext } from './memory-context.js';

export class MemoryNonceAllocator implements NonceAllocator {
  /** Account → the next nonce to hand out. */
  readonly #next = new Map<string, number>();

  constructor(private readonly context: MemoryContext) {}

  async allocate(account: string, chainNonceFloor: number): Promise<number> {
    requireKey('account', account);
    requireNonNegativeInteger('chainNonceFloor', chainNonceFloor);
    this.context.assertOpen('nonces.allocate');
    const nonce = Math.max(this.#next.get(account) ?? 0, chainNonceFloor);
    this.#next.set(account, nonce + 1);
    return nonce;
  }

  async reset(account: string, nextNonce: number): Promise<void> {
    requireKey('account', account);
    requireNonNegativeInteger('nextNonce', nextNonce);
    this.context.assertOpen('nonces.reset');
    this.#next.set(account, nextNonce);
  }

  async peek(account: string): Promise<number | null> {
    requireKey('account', account);
    this.context.assertOpen('nonces.peek');
    return this.#next.get(account) ?? null;
  }
}
