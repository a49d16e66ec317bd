import { createServer, type RequestListener, type Server, type ServerResponse } from 'node:http';

export interface HttpServerTimeouts {
  /** Longest a client may take to send a request's headers (slow-header clients are cut off). */
  readonly headersTimeoutMs: number;
  /**
   * Longest a client may take to send a whole request, body included. It bounds receiving only: once the
   * request is in, the response (a long event stream, say) takes as long as it takes.
   */
  readonly requestTimeoutMs: number;
  /** How long a keep-alive connection may sit idle between requests. */
  readonly keepAliveTimeoutMs: number;
}

// Node enforces the two request timeouts on a periodic sweep of open connections (every 30 s by default),
// so a timeout is only as precise as the sweep: sweep at a quarter of the shortest, at most once a second.
const MAX_SWEEP_INTERVAL_MS = 1_000;
const MIN_SWEEP_INTERVAL_MS = 10;

/**
 * The gateway's HTTP server: `app` behind the timeouts that keep slow or idle clients from holding
 * connections. A client too slow with its request is answered 408 and disconnected.
 */
export function createHttpServer(app: RequestListener, timeouts: HttpServerTimeouts): Server {
  const { headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs } = timeouts;
  if (requestTimeoutMs > 0 && headersTimeoutMs > requestTimeoutMs)
    throw new RangeError(
      `The headers timeout (${headersTimeoutMs} ms) must not exceed the request timeout (${requestTimeoutMs} ms).`,
    );
  const enforced = [headersTimeoutMs, requestTimeoutMs].filter((timeout) => timeout > 0);
  const sweepMs = Math.min(
    MAX_SWEEP_INTERVAL_MS,
    Math.max(MIN_SWEEP_INTERVAL_MS, Math.floor(Math.min(...enforced, MAX_SWEEP_INTERVAL_MS * 4) / 4)),
  );
  const server = createServer(
    {
      headersTimeout: headersTimeoutMs,
      requestTimeout: requestTimeoutMs,
      keepAliveTimeout: keepAliveTimeoutMs,
      connectionsCheckingInterval: sweepMs,
    },
    app,
  );
  // A stopping server closes each connection as soon as its request is answered: kept alive, it would hold
  // the drain open until the grace ran out (and take more requests meanwhile).
  server.on('request', (_request, response: ServerResponse) =>
    response.once('close', () => {
      if (!server.listening) setImmediate(() => server.closeIdleConnections());
    }),
  );
  return server;
}

/**
 * Stops taking connections and lets the requests in flight (completion streams included) finish for up
 * to `graceMs`, closing each connection as its request ends; then closes what is left. Resolves once
 * every connection is closed.
 */
export function drainHttpServer(server: Server, graceMs: number): Promise<void> {
  return new Promise((resolve) => {
    const cutOff = setTimeout(() => server.closeAllConnections(), graceMs);
    server.close(() => {
      clearTimeout(cutOff);
      resolve();
    });
    server.closeIdleConnections();
  });
}
