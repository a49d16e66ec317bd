import type { Channels } from '../store.js';
import { requireKey } from '../validation.js';
import type { MemoryContext } from './memory-context.js';

interface Subscription {
  readonly onMessage: (payload: Uint8Array) => void;
  /** Cleared by unsubscribe or close: a message already queued for it is then not delivered. */
  active: boolean;
}

/**
 * Channels within one process. Each delivery is its own microtask, so a publisher never runs subscriber
 * code inline, one subscriber that throws keeps no other from its message, and messages keep their order.
 */
export class MemoryChannels implements Channels {
  readonly #subscriptions = new Map<string, Set<Subscription>>();

  constructor(private readonly context: MemoryContext) {}

  async publish(channel: string, payload: Uint8Array): Promise<void> {
    requireKey('channel', channel);
    this.context.assertOpen('channels.publish');
    for (const subscription of this.#subscriptions.get(channel) ?? []) {
      // A copy each, taken now: the publisher may reuse its buffer, a subscriber may change its own.
      const copy = Uint8Array.from(payload);
      queueMicrotask(() => {
        if (subscription.active) subscription.onMessage(copy);
      });
    }
  }

  async subscribe(channel: string, onMessage: (payload: Uint8Array) => void): Promise<() => Promise<void>> {
    requireKey('channel', channel);
    this.context.assertOpen('channels.subscribe');
    const subscription: Subscription = { onMessage, active: true };
    const subscriptions = this.#subscriptions.get(channel) ?? new Set<Subscription>();
    subscriptions.add(subscription);
    this.#subscriptions.set(channel, subscriptions);
    return async () => {
      subscription.active = false;
      const current = this.#subscriptions.get(channel);
      if (current?.delete(subscription) && current.size === 0) this.#subscriptions.delete(channel);
    };
  }

  close(): void {
    for (const subscriptions of this.#subscriptions.values())
      for (const subscription of subscriptions) subscription.active = false;
    this.#subscriptions.clear();
  }
}
