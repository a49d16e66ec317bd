import { Agent, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from '@jest/globals';
import { createHttpServer, drainHttpServer } from '../src/http/http-server.js';

// A stopping gateway (SIGTERM) lets the completion streams in flight finish within HTTP_SHUTDOWN_GRACE,
// and stops as soon as they have, over keep-alive connections too (what clients and proxies use).

const agents: Agent[] = [];
const servers: Server[] = [];

afterEach(() => {
  for (const agent of agents.splice(0)) agent.destroy();
  for (const server of servers.splice(0)) server.closeAllConnections();
});

/** A server answering every request with an event stream of `events` events, one every 100 ms. */
async function streamingServer(events: number): Promise<{ server: Server; port: number }> {
  const server = createHttpServer(
    (_request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      let sent = 0;
      const timer = setInterval(() => {
        response.write(`data: ${sent}\n\n`);
        if (++sent < events) return;
        clearInterval(timer);
        response.end('data: [DONE]\n\n');
      }, 100);
      response.once('close', () => clearInterval(timer));
    },
    { headersTimeoutMs: 20_000, requestTimeoutMs: 60_000, keepAliveTimeoutMs: 65_000 },
  );
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

/** The whole body of a GET over a keep-alive connection; rejects if the connection is cut. */
function streamed(port: number): { body: Promise<string>; started: Promise<void> } {
  const agent = new Agent({ keepAlive: true });
  agents.push(agent);
  let started!: () => void;
  const headers = new Promise<void>((resolve) => (started = resolve));
  const body = new Promise<string>((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: '/', agent }, (response) => {
      started();
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve(text));
      response.on('error', reject);
      response.on('aborted', () => reject(new Error('stream cut')));
    })
      .on('error', reject)
      .end();
  });
  return { body, started: headers };
}

describe('draining the gateway’s HTTP server', () => {
  it('lets a stream in flight at the drain finish within the grace, then stops at once', async () => {
    const { server, port } = await streamingServer(8);
    const call = streamed(port);
    await call.started;

    const drainStarted = Date.now();
    const drained = drainHttpServer(server, 10_000);
    const body = await call.body;
    expect(body).toContain('data: 7\n\n');
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    await drained;
    // The stream took under a second; a kept-alive connection must not hold the drain for the grace.
    expect(Date.now() - drainStarted).toBeLessThan(3_000);
  });

  it('cuts a stream still running when the grace runs out', async () => {
    const { server, port } = await streamingServer(1_000);
    const call = streamed(port);
    await call.started;

    const drainStarted = Date.now();
    await drainHttpServer(server, 300);
    expect(Date.now() - drainStarted).toBeLessThan(3_000);
    await expect(call.body).rejects.toThrow();
  });
});
