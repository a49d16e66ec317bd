import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

/**
 * `GET /metrics` (Prometheus text) on a listener of its own, apart from the public port: what operators
 * scrape never goes through the load balancer users reach.
 */
export class MetricsServer {
  readonly #server: Server;

  constructor(registry: Registry) {
    this.#server = createServer((request, response) => {
      const path = (request.url ?? '/').split('?')[0];
      if (request.method !== 'GET' || path !== '/metrics') {
        response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
        return;
      }
      registry.metrics().then(
        (body) => response.writeHead(200, { 'content-type': registry.contentType }).end(body),
        () => response.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable\n'),
      );
    });
  }

  /** Listens and returns the port (0 picks a free one). */
  async listen(port: number, host: string): Promise<number> {
    this.#server.listen(port, host);
    await once(this.#server, 'listening');
    return (this.#server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
