import type {
  Channels,
  ConcurrencyLeases,
  Counters,
  ExclusiveLocks,
  ExpiringValues,
  FrameStreams,
  Queues,
  NonceAllocator,
  Presence,
  RateWindows,
  RevocationMarkers,
  Store,
  Tallies,
} from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import { BlockingConnectionPool } from './blocking-connections.js';
import { RedisChannels } from './channels.js';
import { RedisConcurrencyLeases } from './concurrency-leases.js';
import { RedisCounters } from './counters.js';
import { RedisExclusiveLocks } from './exclusive-locks.js';
import { RedisExpiringValues } from './expiring-values.js';
import { RedisFrameStreams } from './frame-streams.js';
import { RedisKeyspace } from './keys.js';
import { RedisNonceAllocator } from './nonces.js';
import { RedisPresence } from './presence.js';
import { RedisQueues } from './queues.js';
import { RedisRateWindows } from './rate-windows.js';
import { RedisRevocationMarkers } from './revocations.js';
import { RedisTallies } from './tallies.js';
import { RedisCommandRunner } from './redis-client.js';
import { openRedisClient, type RedisClient } from './redis-connection.js';

const DEFAULT_MAX_BLOCKING_READERS = 32;

export interface RedisStoreOptions {
  /**
   * An ioredis client (a `Redis` or a `Cluster`) with the default (RESP2) reply mapping, which the store
   * uses but never closes, or a URL, for which the store opens and closes its own client: `redis://` /
   * `rediss://` for one server, `redis+cluster://host:port,host:port` / `rediss+cluster://…` for a Redis
   * Cluster (any of its nodes; the client finds the rest).
   */
  readonly redis: RedisClient | string;
  /**
   * Prefix of every key the store writes (`<namespace>:…`), so services and test runs can share a server.
   * No `{` or `}`: a hash tag there would put every key in one cluster slot.
   */
  readonly namespace: string;
  /** Most connections held by blocking frame reads at once; more readers queue for one. Default 32. */
  readonly maxBlockingReaders?: number;
  /** Told about errors of connections the store opened (ioredis reconnects by itself meanwhile). */
  readonly onConnectionError?: (error: Error) => void;
  /**
   * Whether the commands issued during one turn of the event loop leave in one write to the server instead
   * of one write each: on a busy replica (the gateway checks every `/v1` call in the store) the system call
   * per command costs more than the command. Each command is still sent on its own, in the order issued,
   * and answered as before; only the write is shared, at the end of the turn (see RedisCommandRunner).
   * Default: true for the client the store opens from a URL, false for a client handed over (whose other
   * users would share the batching). Blocking reads never batch. Writes leave in `setImmediate`, so a test
   * that fakes timers must keep that one real, or turn this off.
   */
  readonly coalesceWrites?: boolean;
}

/**
 * The store over Redis (6.2 or later), one server or a Redis Cluster: every check is one command or one Lua
 * script on server time, and each one's keys share a hash slot.
 */
export class RedisStore implements Store {
  readonly rateWindows: RateWindows;
  readonly concurrency: ConcurrencyLeases;
  readonly locks: ExclusiveLocks;
  readonly values: ExpiringValues;
  readonly counters: Counters;
  readonly tallies: Tallies;
  readonly frames: FrameStreams;
  readonly queues: Queues;
  readonly presence: Presence;
  readonly nonces: NonceAllocator;
  readonly revocations: RevocationMarkers;
  readonly channels: Channels;
  readonly keyspace: RedisKeyspace;

  readonly #redis: RedisCommandRunner;
  readonly #ownsClient: boolean;
  readonly #blockingConnections: BlockingConnectionPool;
  readonly #channels: RedisChannels;

  constructor(options: RedisStoreOptions) {
    requireKey('namespace', options.namespace);
    const maxBlockingReaders = options.maxBlockingReaders ?? DEFAULT_MAX_BLOCKING_READERS;
    requirePositiveInteger('maxBlockingReaders', maxBlockingReaders);
    const onConnectionError = options.onConnectionError ?? (() => undefined);
    this.keyspace = new RedisKeyspace(options.namespace);

    this.#ownsClient = typeof options.redis === 'string';
    const client = typeof options.redis === 'string' ? openRedisClient(options.redis) : options.redis;
    // Without a listener ioredis reports every reconnect attempt on stderr; failed commands still reject.
    if (this.#ownsClient) client.on('error', onConnectionError);

    this.#redis = new RedisCommandRunner(client, {
      coalesceWrites: options.coalesceWrites ?? this.#ownsClient,
    });
    this.#blockingConnections = new BlockingConnectionPool(client, maxBlockingReaders, onConnectionError);
    this.rateWindows = new RedisRateWindows(this.#redis, this.keyspace);
    this.concurrency = new RedisConcurrencyLeases(this.#redis, this.keyspace);
    this.locks = new RedisExclusiveLocks(this.#redis, this.keyspace);
    this.values = new RedisExpiringValues(this.#redis, this.keyspace);
    this.counters = new RedisCounters(this.#redis, this.keyspace);
    this.tallies = new RedisTallies(this.#redis, this.keyspace);
    this.frames = new RedisFrameStreams(this.#redis, this.keyspace, this.#blockingConnections);
    this.queues = new RedisQueues(this.#redis, this.keyspace);
    this.presence = new RedisPresence(this.#redis, this.keyspace);
    this.nonces = new RedisNonceAllocator(this.#redis, this.keyspace);
    this.revocations = new RedisRevocationMarkers(this.#redis, this.keyspace, client.isCluster);
    this.#channels = new RedisChannels(this.#redis, this.keyspace, onConnectionError);
    this.channels = this.#channels;
  }

  async ping(): Promise<void> {
    await this.#redis.command('ping', (client) => client.ping());
  }

  async close(): Promise<void> {
    if (this.#redis.closed) return;
    this.#redis.markClosed();
    this.#blockingConnections.close();
    this.#channels.close();
    if (!this.#ownsClient) return;
    try {
      await this.#redis.client.quit();
    } catch {
      // QUIT fails only when the connection is already gone, which is the state close() wants.
      this.#redis.client.disconnect();
    }
  }
}
