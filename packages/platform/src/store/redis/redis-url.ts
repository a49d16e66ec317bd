// Redis URLs, with no client attached (the configuration checks them): `redis://` / `rediss://` name one
// server; `redis+cluster://` / `rediss+cluster://` name a Redis Cluster by some of its nodes.

const CLUSTER_URL = /^(rediss?)\+cluster:\/\/(?:([^@/?#]*)@)?([^/?#]+)\/?(?:0)?$/;

/** Whether `url` names a Redis Cluster (`redis+cluster://` or `rediss+cluster://`). */
export function isRedisClusterUrl(url: string): boolean {
  return /^rediss?\+cluster:\/\//.test(url);
}

/** The startup nodes and connection options of a `redis+cluster://` / `rediss+cluster://` URL. */
export function parseRedisClusterUrl(url: string): {
  readonly nodes: Array<{ readonly host: string; readonly port: number }>;
  readonly username: string | undefined;
  readonly password: string | undefined;
  readonly tls: boolean;
} {
  const match = CLUSTER_URL.exec(url);
  if (match === null) {
    throw new RangeError(
      'must be redis+cluster://[user:password@]host:port[,host:port…] (rediss+cluster:// for TLS) for a Redis Cluster, with no database and no query',
    );
  }
  const [, scheme, userinfo, hostList] = match as unknown as [string, string, string | undefined, string];
  const nodes = hostList.split(',').map((hostPort) => {
    const node = /^(\[[^\]]+\]|[^:[\]]+)(?::(\d{1,5}))?$/.exec(hostPort);
    if (node === null)
      throw new RangeError(`must name each Redis Cluster node as host:port, got ${hostPort}`);
    const host = (node[1] as string).replace(/^\[(.*)\]$/, '$1');
    const port = node[2] === undefined ? 6379 : Number(node[2]);
    if (port < 1 || port > 65535)
      throw new RangeError(`must name each Redis Cluster node as host:port, got ${hostPort}`);
    return { host, port };
  });
  let username: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined && userinfo !== '') {
    const colon = userinfo.indexOf(':');
    const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
    username = user === '' ? undefined : decodeURIComponent(user);
    password = colon < 0 ? undefined : decodeURIComponent(userinfo.slice(colon + 1));
  }
  return { nodes, username, password, tls: scheme === 'rediss' };
}

/** Throws a RangeError saying what is wrong unless `url` names one Redis server or a Redis Cluster. */
export function checkRedisUrl(url: string): void {
  if (isRedisClusterUrl(url)) {
    parseRedisClusterUrl(url);
    return;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RangeError('must be a URL');
  }
  if (parsed.protocol !== 'redis:' && parsed.protocol !== 'rediss:') {
    throw new RangeError('must be a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL');
  }
}
