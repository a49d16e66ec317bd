import { describe, expect, it } from '@jest/globals';
import { StoreClosedError } from '../../../src/store/index.js';
import { sleep, uniqueKey, type UseFixture } from './fixture.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (payload: Uint8Array): string => new TextDecoder().decode(payload);

/** How long a message that should arrive may take; past it the test fails. */
const ARRIVAL_TIMEOUT_MS = 2_000;
/** How long to keep listening for a message that must not arrive, once a later one has. */
const QUIET_MS = 150;

/** What one subscriber received, with a wait for the next messages. */
class Inbox {
  readonly received: Uint8Array[] = [];
  #wake: () => void = () => undefined;

  readonly onMessage = (payload: Uint8Array): void => {
    this.received.push(payload);
    this.#wake();
  };

  get texts(): string[] {
    return this.received.map(text);
  }

  /** Resolves once `count` messages arrived in all; fails after ARRIVAL_TIMEOUT_MS. */
  async waitFor(count: number): Promise<string[]> {
    const deadline = Date.now() + ARRIVAL_TIMEOUT_MS;
    while (this.received.length < count) {
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(`expected ${count} messages within ${ARRIVAL_TIMEOUT_MS} ms, got ${this.texts}`);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    return this.texts;
  }
}

export function channelsContract(use: UseFixture): void {
  describe('channels', () => {
    it('delivers a payload byte-exact to a subscriber on another replica', async () => {
      const [publisher, listener] = use().replicas;
      const channel = uniqueKey('hints');
      const inbox = new Inbox();
      const unsubscribe = await listener.channels.subscribe(channel, inbox.onMessage);
      const payload = Uint8Array.from([0, 255, 10, 13, 0, 128, 1]);
      await publisher.channels.publish(channel, payload);
      await inbox.waitFor(1);
      expect(inbox.received).toEqual([payload]);
      await unsubscribe();
    });

    it('delivers to every subscriber of the channel, and to none of another channel', async () => {
      const [first, second] = use().replicas;
      const channel = uniqueKey('hints');
      const [onFirst, onSecond, sameStore, otherChannel] = [
        new Inbox(),
        new Inbox(),
        new Inbox(),
        new Inbox(),
      ];
      const unsubscribes = await Promise.all([
        first.channels.subscribe(channel, onFirst.onMessage),
        second.channels.subscribe(channel, onSecond.onMessage),
        second.channels.subscribe(channel, sameStore.onMessage),
        second.channels.subscribe(uniqueKey('hints'), otherChannel.onMessage),
      ]);
      await first.channels.publish(channel, bytes('wake'));
      expect(await onFirst.waitFor(1)).toEqual(['wake']);
      expect(await onSecond.waitFor(1)).toEqual(['wake']);
      expect(await sameStore.waitFor(1)).toEqual(['wake']);
      await sleep(QUIET_MS);
      expect(onFirst.texts).toEqual(['wake']);
      expect(onSecond.texts).toEqual(['wake']);
      expect(otherChannel.texts).toEqual([]);
      await Promise.all(unsubscribes.map((unsubscribe) => unsubscribe()));
    });

    it('delivers nothing more after unsubscribe, while other subscribers of the channel still get it', async () => {
      const [publisher, listener] = use().replicas;
      const channel = uniqueKey('hints');
      const [leaving, staying] = [new Inbox(), new Inbox()];
      const unsubscribeLeaving = await listener.channels.subscribe(channel, leaving.onMessage);
      const unsubscribeStaying = await listener.channels.subscribe(channel, staying.onMessage);
      await publisher.channels.publish(channel, bytes('before'));
      await leaving.waitFor(1);
      await unsubscribeLeaving();
      await unsubscribeLeaving();
      await publisher.channels.publish(channel, bytes('after'));
      expect(await staying.waitFor(2)).toEqual(['before', 'after']);
      await sleep(QUIET_MS);
      expect(leaving.texts).toEqual(['before']);

      // The last subscriber gone, nothing arrives; subscribing again works.
      await unsubscribeStaying();
      const again = new Inbox();
      const unsubscribeAgain = await listener.channels.subscribe(channel, again.onMessage);
      await publisher.channels.publish(channel, bytes('again'));
      expect(await again.waitFor(1)).toEqual(['again']);
      await sleep(QUIET_MS);
      expect(staying.texts).toEqual(['before', 'after']);
      await unsubscribeAgain();
    });

    it("delivers one publisher's messages in the order published", async () => {
      const [publisher, listener] = use().replicas;
      const channel = uniqueKey('hints');
      const inbox = new Inbox();
      const unsubscribe = await listener.channels.subscribe(channel, inbox.onMessage);
      const sent = Array.from({ length: 20 }, (_, index) => `m${index}`);
      // Issued together, not one awaited after the other: the order is the order of the calls.
      await Promise.all(sent.map((message) => publisher.channels.publish(channel, bytes(message))));
      expect(await inbox.waitFor(20)).toEqual(sent);
      await unsubscribe();
    });

    it('delivers nothing published before the subscription resolved', async () => {
      const [publisher, listener] = use().replicas;
      const channel = uniqueKey('hints');
      // Another subscriber of the channel in the same store, so the channel is already subscribed there.
      const earlier = new Inbox();
      const unsubscribeEarlier = await listener.channels.subscribe(channel, earlier.onMessage);
      await publisher.channels.publish(channel, bytes('early'));
      const inbox = new Inbox();
      const unsubscribe = await listener.channels.subscribe(channel, inbox.onMessage);
      await publisher.channels.publish(channel, bytes('late'));
      expect(await inbox.waitFor(1)).toEqual(['late']);
      expect(await earlier.waitFor(2)).toEqual(['early', 'late']);

      const fresh = uniqueKey('hints');
      await publisher.channels.publish(fresh, bytes('early'));
      const freshInbox = new Inbox();
      const unsubscribeFresh = await listener.channels.subscribe(fresh, freshInbox.onMessage);
      await publisher.channels.publish(fresh, bytes('late'));
      expect(await freshInbox.waitFor(1)).toEqual(['late']);
      await sleep(QUIET_MS);
      expect(inbox.texts).toEqual(['late']);
      expect(freshInbox.texts).toEqual(['late']);
      await Promise.all([unsubscribe(), unsubscribeEarlier(), unsubscribeFresh()]);
    });

    it('never runs a subscriber inside the publish call', async () => {
      const [store] = use().replicas;
      const channel = uniqueKey('hints');
      const inbox = new Inbox();
      const unsubscribe = await store.channels.subscribe(channel, inbox.onMessage);
      const publishing = store.channels.publish(channel, bytes('x'));
      expect(inbox.received).toEqual([]);
      await publishing;
      await inbox.waitFor(1);
      await unsubscribe();
    });

    it('drops its subscriptions at close, then refuses publish and subscribe with StoreClosedError', async () => {
      const store = await use().openScratch();
      const channel = uniqueKey('hints');
      const inbox = new Inbox();
      const unsubscribe = await store.channels.subscribe(channel, inbox.onMessage);
      await store.close();
      await expect(store.channels.publish(channel, bytes('x'))).rejects.toThrow(StoreClosedError);
      await expect(store.channels.subscribe(channel, inbox.onMessage)).rejects.toThrow(StoreClosedError);
      await use().replicas[0].channels.publish(channel, bytes('after close'));
      await expect(unsubscribe()).resolves.toBeUndefined();
      await sleep(QUIET_MS);
      expect(inbox.received).toEqual([]);
    });

    it('refuses an empty channel name', async () => {
      const [store] = use().replicas;
      await expect(store.channels.publish('', bytes('x'))).rejects.toThrow(RangeError);
      await expect(store.channels.subscribe('', () => undefined)).rejects.toThrow(RangeError);
    });
  });
}
