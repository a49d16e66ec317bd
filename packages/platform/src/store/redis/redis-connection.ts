import { Cluster, Redis } from 'ioredis';
import { isRedisClusterUrl, parseRedisClusterUrl } from './redis-url.js';

/**
 * A client of one Redis server or of a Redis Cluster. The store runs the same commands and scripts on
 * either: every operation's keys share one hash slot (see RedisKeyspace), which is all a cluster asks.
 */
export type RedisClient = Redis | Cluster;

/**
 * A client for a URL: a Cluster client for `redis+cluster://host:port,host:port` (any reachable nodes; it
 * finds the rest), else a single-server client for `redis://` / `rediss://`.
 */
export function openRedisClient(url: string): RedisClient {
  if (!isRedisClusterUrl(url)) return new Redis(url);
  const { nodes, username, password, tls } = parseRedisClusterUrl(url);
  return new Cluster(nodes, {
    redisOptions: { username, password, ...(tls ? { tls: {} } : {}) },
  });
}

/** The connections a client writes on: the client itself, or each primary of a cluster it knows now. */
export function serverConnections(client: RedisClient): Redis[] {
  return client.isCluster ? (client as Cluster).nodes('master') : [client as Redis];
}

/** Every key matching `pattern`, on every primary of a cluster (SCAN walks one server). */
export async function scanKeys(client: RedisClient, pattern: string): Promise<string[]> {
  const found: string[] = [];
  // A cluster client learns its primaries once connected; a command waits for that.
  if (client.isCluster) await client.ping();
  for (const server of serverConnections(client)) {
    let cursor = '0';
    do {
      const [next, keys] = await server.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      found.push(...keys);
      cursor = next;
    } while (cursor !== '0');
  }
  return found;
}

/**
 * Deletes every key under `namespace` (SCAN, so a large namespace does not block a server), one key per
 * UNLINK: on a cluster a multi-key UNLINK must stay within one slot.
 */
export async function deleteKeysUnder(client: RedisClient, namespace: string): Promise<number> {
  const keys = await scanKeys(client, `${namespace}:*`);
  if (!client.isCluster) {
    for (let at = 0; at < keys.length; at += 500) await client.unlink(...keys.slice(at, at + 500));
    return keys.length;
  }
  await Promise.all(keys.map((key) => client.unlink(key)));
  return keys.length;
}
