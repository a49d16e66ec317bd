import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '@svc/platform';
import { testServiceClientOptions } from '@svc/platform/testing';
import { closeClient, createClient } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { freePort } from '@svc/testkit';
import type { KeyServiceClient } from '../../src/key-service-client.js';
import { GatewayMetrics } from '../../src/observability/gateway-metrics.js';
import type { ResolvedApiKey } from '../../src/v1/key-resolution-cache.js';
import { LimitHitReporter } from '../../src/v1/limit-hit-reporter.js';
import { SpendReservations } from '../../src/v1/spend-reservations.js';
import { silentLogger, startKeyService, type RunningKeyService } from '../support/key-service.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { mintKey } from './support/keys.js';
import { startV1Gateway, type V1Gateway } from './support/v1-gateway.js';

let redis: TestStore;
let keyService: RunningKeyService;
let gateway: V1Gateway;
const clients: KeyServiceClient[] = [];

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  gateway = await startV1Gateway({ keyServiceAddress: keyService.address, store: redis.open() });
});

afterAll(async () => {
  clients.forEach((client) => closeClient(client));
  await gateway?.close();
  await keyService?.close();
  await redis?.cleanup();
});

function keyServiceAt(address: string): KeyServiceClient {
  const client = createClient(
    KeyService,
    address,
    testServiceClientOptions('key-service', { defaultUnaryTimeoutMs: 2_000 }),
  );
  clients.push(client);
  return client;
}

async function settlements(metrics: GatewayMetrics, action: string, outcome: string): Promise<number> {
  const metric = await metrics.registry.getSingleMetric('gateway_spend_settlements_total')?.get();
  const value = metric?.values.find(({ labels }) => labels.action === action && labels.outcome === outcome);
  return value?.value ?? 0;
}

describe('SpendReservations', () => {
  it('counts every settlement by outcome, and logs and counts a commit that did not come back COMMITTED', async () => {
    const minted = await mintKey(gateway.baseUrl);
    const reachable = keyServiceAt(keyService.address);
    const resolved = await reachable.resolveKey({ presentedKey: minted.key });
    const key: ResolvedApiKey = {
      keyId: resolved.keyId,
      prefix: resolved.prefix,
      wallet: resolved.wallet?.hex ?? '',
      spendCapWei: null,
    };
    // Commits go to a key-service that is not there; everything else reaches the real one.
    const unreachable = keyServiceAt(`127.0.0.1:${await freePort()}`);
    const commitsLost = new Proxy(reachable, {
      get: (target, property, receiver) =>
        property === 'commitSpend'
          ? unreachable.commitSpend.bind(unreachable)
          : (Reflect.get(target, property, receiver) as unknown),
    });
    const lines: string[] = [];
    const logger = createLogger({
      service: 'gateway-test',
      level: 'error',
      destination: { write: (line: string) => lines.push(line) },
    });
    const metrics = new GatewayMetrics();
    const limitHits = new LimitHitReporter(reachable, silentLogger);
    const spend = new SpendReservations(reachable, limitHits, 60_000, metrics, logger);
    const lossy = new SpendReservations(commitsLost, limitHits, 60_000, metrics, logger);

    const answered = await spend.reserve(key, 1_000n, 'call-answered');
    await answered.commit(900n);
    await answered.commit(900n);
    const notSubmitted = await spend.reserve(key, 1_000n, 'call-not-submitted');
    await notSubmitted.release();
    expect(await settlements(metrics, 'commit', 'committed')).toBe(1);
    expect(await settlements(metrics, 'release', 'released')).toBe(1);
    expect(lines).toEqual([]);

    const lost = await lossy.reserve(key, 1_000n, 'call-lost');
    await lost.commit(900n);
    expect(await settlements(metrics, 'commit', 'error')).toBe(1);
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0] ?? '{}')).toMatchObject({
      level: 'error',
      reservationId: lost.reservationId,
      msg: 'could not commit a spend reservation',
    });
  });
});
