import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface HealthServerOptions {
  readonly host: string;
  readonly port: number;
  /** Why the worker should not get new work now, or undefined when it is ready. */
  readonly notReadyBecause: () => string | undefined;
  readonly metrics: Registry;
}

/**
 * `/healthz` (the process answers), `/readyz` (registered, linked, not draining) and `/metrics`
 * (Prometheus text), for Kubernetes probes and scraping.
 */
export class HealthServer {
  readonly #options: HealthServerOptions;
  readonly #server: Server;

  constructor(options: HealthServerOptions) {
    this.#options = options;
    this.#server = createServer((request, response) => {
      void (async () => {
        const path = (request.url ?? '/').split('?')[0];
        if (path === '/healthz') {
          response.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
        } else if (path === '/readyz') {
          const reason = this.#options.notReadyBecause();
          response
            .writeHead(reason === undefined ? 200 : 503, { 'content-type': 'text/plain' })
            .end(`${reason ?? 'ready'}\n`);
        } else if (path === '/metrics') {
          const body = await this.#options.metrics.metrics();
          response.writeHead(200, { 'content-type': this.#options.metrics.contentType }).end(body);
        } else {
          response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
        }
      })().catch(() => {
        if (!response.headersSent) response.writeHead(500);
        response.end();
      });
    });
  }

  async listen(): Promise<number> {
    this.#server.listen(this.#options.port, this.#options.host);
    await once(this.#server, 'listening');
    return (this.#server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}
