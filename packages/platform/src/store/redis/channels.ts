import { randomUUID } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { StoreClosedError, StoreUnavailableError } from '../errors.js';
import type { Channels } from '../store.js';
import { requireKey } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import type { LuaScript, RedisCommandRunner } from './redis-client.js';
import type { RedisClient } from './redis-connection.js';

/** Longest wait for a subscription's marker (see `#barrier`) before the subscribe fails as unavailable. */
const MARKER_TIMEOUT_MS = 10_000;

// On a cluster a PUBLISH names no key, so ioredis sends each one to any primary, and two publishes of one
// channel could reach a subscriber in either order (each primary forwards on its own cluster-bus link).
// Naming the channel as the script's key sends every publish of a channel to one primary, in order.
const PUBLISH_IN_SLOT: LuaScript = {
  name: 'svcStoreChannelPublish',
  keys: 1,
  lua: `return redis.call('PUBLISH', KEYS[1], ARGV[1])`,
};

// A subscription's marker: published on the store's own marker channel from the primary every publish of
// the subscribed channel goes through (the channel is the key), so it reaches the subscriber after each of
// them that this primary handled before it.
const PUBLISH_MARKER: LuaScript = {
  name: 'svcStoreChannelMarker',
  keys: 1,
  lua: `return redis.call('PUBLISH', ARGV[1], ARGV[2])`,
};

interface Listener {
  readonly onMessage: (payload: Uint8Array) => void;
}

interface PendingMarker {
  arrive(): void;
  fail(error: Error): void;
}

/**
 * Redis pub/sub. PUBLISH goes through the shared client. Every subscription of the store shares one
 * connection of its own (a duplicate of the client, opened at the first subscribe), which SUBSCRIBEs once
 * per channel and UNSUBSCRIBEs when the channel's last listener goes; ioredis subscribes again after a
 * reconnect (autoResubscribe; on a cluster its subscriber moves to another node with its channels).
 *
 * A listener starts with the arrival of a marker the store publishes after subscribing, from the primary
 * that handles the channel's publishes: whatever that primary sent before reaches the connection earlier
 * and is not delivered to it. (On a cluster the subscriber connection may be on another node, which hears
 * a publish over the cluster bus after the publisher got its reply; a SUBSCRIBE reply alone would let such
 * a message through.)
 */
export class RedisChannels implements Channels {
  /** Listeners per channel (its full name), present while the connection is subscribed to the channel. */
  readonly #listeners = new Map<string, Set<Listener>>();
  /** The last subscription change of each channel: changes of one channel run one after another. */
  readonly #changes = new Map<string, Promise<unknown>>();
  readonly #markers = new Map<string, PendingMarker>();
  readonly #markerChannel: string;
  #lastMarker = 0;
  #subscriber: Promise<RedisClient> | undefined;
  #subscriberClient: RedisClient | undefined;
  #closed = false;

  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
    private readonly onConnectionError: (error: Error) => void,
  ) {
    this.#markerChannel = keys.channelMarkers(randomUUID());
  }

  async publish(channel: string, payload: Uint8Array): Promise<void> {
    requireKey('channel', channel);
    const name = this.keys.channel(channel);
    const message = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
    if (this.redis.client.isCluster) {
      await this.redis.script('channels.publish', PUBLISH_IN_SLOT, [name], [message]);
      return;
    }
    await this.redis.command('channels.publish', (client) => client.publish(name, message));
  }

  async subscribe(channel: string, onMessage: (payload: Uint8Array) => void): Promise<() => Promise<void>> {
    requireKey('channel', channel);
    if (this.#closed) throw new StoreClosedError('channels.subscribe');
    const name = this.keys.channel(channel);
    const listener: Listener = { onMessage };
    try {
      await this.#change(name, async () => {
        const connection = await this.#connection();
        let listeners = this.#listeners.get(name);
        if (listeners === undefined) {
          await connection.subscribe(name);
          this.#assertOpen();
          listeners = new Set();
          this.#listeners.set(name, listeners);
        }
        const joined = listeners;
        try {
          await this.#marker(name, () => joined.add(listener));
        } catch (error) {
          if (joined.size === 0) await this.#drop(name);
          throw error;
        }
      });
    } catch (error) {
      throw this.redis.toStoreError('channels.subscribe', error);
    }
    let unsubscribed: Promise<void> | undefined;
    return () => (unsubscribed ??= this.#unsubscribe(name, listener));
  }

  /** Drops every subscription at once, with the connection that held them. */
  close(): void {
    this.#closed = true;
    this.#listeners.clear();
    for (const marker of this.#markers.values()) marker.fail(new StoreClosedError('channels.subscribe'));
    this.#subscriberClient?.disconnect();
  }

  async #unsubscribe(name: string, listener: Listener): Promise<void> {
    // Delivery stops here; the UNSUBSCRIBE, when it was the last listener, follows in turn.
    if (!this.#listeners.get(name)?.delete(listener)) return;
    await this.#change(name, () => this.#drop(name)).catch(() => undefined);
  }

  /** UNSUBSCRIBEs a channel left without listeners. Never rejects. */
  async #drop(name: string): Promise<void> {
    if (this.#closed || this.#listeners.get(name)?.size !== 0) return;
    this.#listeners.delete(name);
    try {
      await (await this.#connection()).unsubscribe(name);
    } catch {
      // The connection stays subscribed; the channel's messages find no listener and are dropped, and the
      // next subscribe of the channel sends SUBSCRIBE again.
    }
  }

  #change(name: string, run: () => Promise<void>): Promise<void> {
    const previous = this.#changes.get(name) ?? Promise.resolve();
    const next = previous.then(run);
    const settled = next.catch(() => undefined);
    this.#changes.set(name, settled);
    void settled.then(() => {
      if (this.#changes.get(name) === settled) this.#changes.delete(name);
    });
    return next;
  }

  /** Publishes a marker for `name` and calls `arrive` as the marker reaches the subscriber connection. */
  #marker(name: string, arrive: () => void): Promise<void> {
    const token = String((this.#lastMarker += 1));
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () =>
          pending.fail(
            new StoreUnavailableError('channels.subscribe', {
              cause: new Error(`no subscription marker within ${MARKER_TIMEOUT_MS} ms`),
            }),
          ),
        MARKER_TIMEOUT_MS,
      );
      const settle = () => {
        clearTimeout(timer);
        this.#markers.delete(token);
      };
      const pending: PendingMarker = {
        arrive: () => {
          settle();
          arrive();
          resolve();
        },
        fail: (error) => {
          settle();
          reject(error);
        },
      };
      this.#markers.set(token, pending);
      this.redis
        .script('channels.subscribe', PUBLISH_MARKER, [name], [this.#markerChannel, token])
        .catch((error: unknown) => pending.fail(error as Error));
    });
  }

  #connection(): Promise<RedisClient> {
    this.#assertOpen();
    this.#subscriber ??= this.#openConnection().catch((error: unknown) => {
      // The next subscribe tries a new connection.
      this.#subscriberClient?.disconnect();
      this.#subscriber = undefined;
      this.#subscriberClient = undefined;
      throw error;
    });
    return this.#subscriber;
  }

  async #openConnection(): Promise<RedisClient> {
    const source = this.redis.client;
    // The two duplicate() signatures differ (a cluster's takes startup nodes first); neither needs any.
    const subscriber: RedisClient = source.isCluster
      ? (source as Cluster).duplicate()
      : (source as Redis).duplicate({ autoResubscribe: true });
    this.#subscriberClient = subscriber;
    subscriber.on('error', this.onConnectionError);
    subscriber.on('messageBuffer', (channel: Buffer, message: Buffer) => this.#deliver(channel, message));
    await subscriber.subscribe(this.#markerChannel);
    this.#assertOpen();
    return subscriber;
  }

  #deliver(channelBytes: Buffer, message: Buffer): void {
    const channel = channelBytes.toString('utf8');
    if (channel === this.#markerChannel) {
      this.#markers.get(message.toString('utf8'))?.arrive();
      return;
    }
    const listeners = this.#listeners.get(channel);
    if (listeners === undefined) return;
    for (const listener of [...listeners]) {
      // A listener unsubscribed by one called before it in this loop gets nothing more.
      if (!listeners.has(listener)) continue;
      try {
        listener.onMessage(new Uint8Array(message));
      } catch (error) {
        // Thrown by a listener, not by Redis: out of the connection's reply parser, and on its own.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  #assertOpen(): void {
    if (this.#closed) throw new StoreClosedError('channels.subscribe');
  }
}
