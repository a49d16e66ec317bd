import { createServer, type Server } from 'node:net';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { freePort } from '../src/ports.js';

async function listen(port: number, host: string): Promise<Server> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  return server;
}

describe('freePort', () => {
  it('hands out ports below the kernel’s ephemeral range, never the same one twice', async () => {
    const [ephemeralLow] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/);
    const ports = [];
    for (let i = 0; i < 50; i++) ports.push(await freePort());
    expect(new Set(ports).size).toBe(ports.length);
    for (const port of ports) expect(port).toBeLessThan(Number(ephemeralLow));
  });

  it('skips a port another process listens on, on loopback alone', async () => {
    let port = await freePort();
    while (port + 1 >= 32_000) port = await freePort();
    const holder = await listen(port + 1, '127.0.0.1');
    try {
      const next = await freePort();
      expect(next).not.toBe(port + 1);
      // And what it hands out binds on every address, as the gateway binds it.
      const server = await listen(next, '0.0.0.0');
      await new Promise((resolve) => server.close(resolve));
    } finally {
      await new Promise((resolve) => holder.close(resolve));
    }
  });
});
