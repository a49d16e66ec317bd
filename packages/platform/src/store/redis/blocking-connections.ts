import type { Cluster, Redis } from 'ioredis';
import { StoreClosedError } from '../errors.js';
import type { RedisClient } from './redis-connection.js';

/**
 * Dedicated connections for blocking reads (XREAD BLOCK holds its connection until it returns), so a
 * blocked reader never stalls the shared connection every other command goes through. Connections are
 * duplicated from the shared client on demand, up to `maxConnections`; further readers wait their turn.
 * On a cluster each one is a cluster client of its own (a connection per primary), whose one blocking
 * read holds only the connection of the primary owning the stream's slot.
 */
export class BlockingConnectionPool {
  readonly #idle: RedisClient[] = [];
  readonly #all = new Set<RedisClient>();
  readonly #waiting: Array<{ resolve: (connection: RedisClient) => void; reject: (error: Error) => void }> =
    [];
  #closed = false;

  constructor(
    private readonly source: RedisClient,
    private readonly maxConnections: number,
    private readonly onConnectionError: (error: Error) => void,
  ) {}

  async withConnection<T>(operation: string, use: (connection: RedisClient) => Promise<T>): Promise<T> {
    const connection = await this.#acquire(operation);
    try {
      return await use(connection);
    } finally {
      this.#release(connection);
    }
  }

  /** Drops every connection at once: a blocked XREAD would hold a graceful QUIT for its whole block time. */
  close(): void {
    this.#closed = true;
    for (const waiter of this.#waiting.splice(0)) waiter.reject(new StoreClosedError('frames.read'));
    for (const connection of this.#all) connection.disconnect();
    this.#all.clear();
    this.#idle.length = 0;
  }

  #acquire(operation: string): Promise<RedisClient> {
    if (this.#closed) return Promise.reject(new StoreClosedError(operation));
    const idle = this.#idle.pop();
    if (idle !== undefined) return Promise.resolve(idle);
    if (this.#all.size < this.maxConnections) {
      // The two duplicate() signatures differ (a cluster's takes startup nodes first); neither needs any.
      const connection: RedisClient = this.source.isCluster
        ? (this.source as Cluster).duplicate()
        : (this.source as Redis).duplicate();
      connection.on('error', this.onConnectionError);
      this.#all.add(connection);
      return Promise.resolve(connection);
    }
    return new Promise((resolve, reject) => this.#waiting.push({ resolve, reject }));
  }

  #release(connection: RedisClient): void {
    if (this.#closed) return;
    const next = this.#waiting.shift();
    if (next !== undefined) next.resolve(connection);
    else this.#idle.push(connection);
  }
}
