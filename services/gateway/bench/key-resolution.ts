// What API-key resolution costs on `/v1`: `GET /v1/models` with the key cache disabled (every call resolves
// through the key-service over gRPC) versus warm (cached key; the revocation marker and the per-key rate
// window still go to Redis on every call, as one script), against a bare express handler in the same
// process. Loopback only, a few seconds per case; prints p50/p99 latency, req/s and the ratios. The
// generator runs in the measured process here: for the gateway against bare express with the generator
// apart, see models-throughput.ts.
//
//   npm run bench -w @svc/gateway        (PostgreSQL and Redis as for the tests; BENCH_SECONDS, BENCH_CONNECTIONS)
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import express from 'express';
import { call, randomWallet, signInOverHttp } from '../test/support/http.js';
import { startBenchKeyService } from './support/key-service.js';
import { createTestStore } from '../test/support/test-store.js';
import { startV1Gateway, type V1Gateway } from '../test/v1/support/v1-gateway.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

interface Measurement {
  readonly name: string;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly requestsPerSecond: number;
  readonly non2xx: number;
}

async function measure(name: string, url: string, apiKey?: string): Promise<Measurement> {
  const headers: Record<string, string> = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
  // A short warm-up first, so connection setup and JIT do not land in the measured run.
  await autocannon({ url, headers, connections: CONNECTIONS, duration: 1 });
  const result = await autocannon({ url, headers, connections: CONNECTIONS, duration: SECONDS });
  return {
    name,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    requestsPerSecond: result.requests.average,
    non2xx: result.non2xx + result.errors,
  };
}

async function startBareExpress(): Promise<{ url: string; close(): Promise<void> }> {
  const app = express();
  app.get('/v1/models', (_req, res) => {
    res.json({ object: 'list', data: [] });
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1/models`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function report(rows: readonly Measurement[]): void {
  const bare = rows.find((row) => row.name === 'bare express');
  console.log(`\nGET /v1/models, ${CONNECTIONS} connections, ${SECONDS} s per case, loopback`);
  console.table(
    rows.map((row) => ({
      case: row.name,
      'p50 ms': row.p50Ms,
      'p99 ms': row.p99Ms,
      'req/s': Math.round(row.requestsPerSecond),
      'non-2xx/errors': row.non2xx,
      'req/s vs bare': bare ? (row.requestsPerSecond / bare.requestsPerSecond).toFixed(2) : '',
    })),
  );
  const cold = rows.find((row) => row.name.startsWith('cold'));
  const warm = rows.find((row) => row.name.startsWith('warm'));
  if (cold && warm)
    console.log(
      `warm / cold: ${(warm.requestsPerSecond / cold.requestsPerSecond).toFixed(2)}x req/s, ` +
        `p50 ${warm.p50Ms} ms vs ${cold.p50Ms} ms`,
    );
}

async function main(): Promise<void> {
  const redis = createTestStore();
  const keyService = await startBenchKeyService(redis.open());
  const gateways: V1Gateway[] = [];
  const bare = await startBareExpress();
  try {
    const env = { V1_KEY_RATE_LIMIT: String(1_000_000_000) };
    const cold = await startV1Gateway({
      keyServiceAddress: keyService.address,
      store: redis.open(),
      env: { ...env, V1_KEY_CACHE_MAX_ENTRIES: '0' },
    });
    const warm = await startV1Gateway({ keyServiceAddress: keyService.address, store: redis.open(), env });
    gateways.push(cold, warm);

    const { token } = await signInOverHttp(warm.baseUrl, randomWallet());
    const minted = await call(warm.baseUrl, 'POST', '/api/api-keys', { token, body: { name: 'bench' } });
    const apiKey = (minted.body as { key: string }).key;

    const rows = [
      await measure('bare express', bare.url),
      await measure('cold (ResolveKey gRPC every call)', `${cold.baseUrl}/v1/models`, apiKey),
      await measure('warm (cache + Redis checks)', `${warm.baseUrl}/v1/models`, apiKey),
    ];
    report(rows);
    console.log(
      `key-service ResolveKey calls: cold gateway ${cold.keyServiceCalls.get('resolveKey') ?? 0}, ` +
        `warm gateway ${warm.keyServiceCalls.get('resolveKey') ?? 0}`,
    );
  } finally {
    await Promise.all(gateways.map((gateway) => gateway.close()));
    await bare.close();
    await keyService.close();
    await redis.cleanup();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
