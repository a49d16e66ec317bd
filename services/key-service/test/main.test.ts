import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { testServiceClientOptions, TEST_SERVICE_TOKEN_SETTINGS } from '@svc/platform/testing';
import { closeClient, createClient, GrpcStatus, RpcError } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { generateKeyServiceSecrets } from '../src/secrets.js';
import { randomWallet } from './support/sign-in.js';
import { createTestDatabase, sampleValue, scrape, type TestDatabase } from '@svc/testkit';
import { createTestStore, type TestStore } from './support/test-store.js';

const packageDir = fileURLToPath(new URL('..', import.meta.url));

let database: TestDatabase;
let redis: TestStore;
let child: ChildProcess | undefined;

beforeAll(async () => {
  // Not migrated: the service applies its migrations at start.
  database = await createTestDatabase({ prefix: 'ks' });
  redis = createTestStore();
});

afterAll(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }
  await redis?.cleanup();
  await database?.drop();
});

/** What a deployment must set: nothing here is safe to default outside the all-in-one target. */
const DEPLOYMENT_SETTINGS = {
  SIWE_DOMAIN: 'keys.example.test',
  SIWE_URI: 'https://keys.example.test/',
  CHAIN_ID: '31337',
  ...generateKeyServiceSecrets(),
  ...TEST_SERVICE_TOKEN_SETTINGS,
};

function spawnMain(settings: Record<string, string>, stderr: 'inherit' | 'pipe'): ChildProcess {
  return spawn(process.execPath, ['--conditions=@svc/source', '--import', 'tsx', 'src/main.ts'], {
    cwd: packageDir,
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: database.url,
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      STORE_NAMESPACE: redis.namespace,
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: '0',
      METRICS_PORT: '0',
      ...settings,
    },
    stdio: ['ignore', 'pipe', stderr],
  });
}

/**
 * Starts src/main.ts as a container does and resolves with its gRPC address and metrics URL from its
 * "started" log line.
 */
function startMain(): Promise<{ grpc: string; metrics: string }> {
  child = spawnMain(DEPLOYMENT_SETTINGS, 'inherit');
  const lines = createInterface({ input: child.stdout! });
  return new Promise((resolve, reject) => {
    child!.once('exit', (code) => reject(new Error(`key-service exited early with code ${code}`)));
    lines.on('line', (line) => {
      const entry = JSON.parse(line) as { msg?: string; grpc?: string; metrics?: string };
      if (entry.msg === 'key-service started' && entry.grpc && entry.metrics)
        resolve({ grpc: entry.grpc, metrics: entry.metrics });
    });
  });
}

describe('main', () => {
  it('refuses to start without the settings only the all-in-one target may default, naming each', async () => {
    const refused = spawnMain({ API_KEY_PEPPER: 'too-short' }, 'pipe');
    let output = '';
    refused.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    refused.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const [code] = await once(refused, 'exit');
    expect(code).not.toBe(0);
    for (const setting of [
      'SIWE_DOMAIN',
      'SIWE_URI',
      'CHAIN_ID',
      'SIGNIN_TOKEN_SIGNING_KEY',
      'SERVICE_TOKEN_CALLER_KEYS',
    ])
      expect(output).toContain(`${setting} is required`);
    expect(output).toContain('API_KEY_PEPPER must be at least 32 characters');
    expect(output).not.toContain('too-short');
  });

  it('migrates, serves the KeyService over gRPC with its metrics, and stops cleanly on SIGTERM', async () => {
    const { grpc: address, metrics } = await startMain();
    const client = createClient(
      KeyService,
      address,
      testServiceClientOptions('key-service', { defaultUnaryTimeoutMs: 10_000 }),
    );
    // Only the gateway may call it: a call with no service token is refused UNAUTHENTICATED, another
    // service's PERMISSION_DENIED, before any handler runs.
    const anonymous = createClient(KeyService, address, { defaultUnaryTimeoutMs: 10_000 });
    const orchestrator = createClient(
      KeyService,
      address,
      testServiceClientOptions('key-service', { as: 'job-orchestrator', defaultUnaryTimeoutMs: 10_000 }),
    );
    try {
      const wallet = randomWallet();
      const challenge = await client.createChallenge({ address: { hex: wallet.address } });
      const signed = await client.verifySignIn({
        message: challenge.message,
        signature: await wallet.signMessage(challenge.message),
      });
      const identity = await client.authenticateToken({ token: signed.token });
      expect(identity.wallet?.hex).toBe(wallet.address);
      const minted = await client.mintKey({ signInToken: signed.token });
      expect((await client.resolveKey({ presentedKey: minted.fullKey })).keyId).toBe(minted.apiKey!.id);
      for (const [refused, status] of [
        [anonymous, GrpcStatus.UNAUTHENTICATED],
        [orchestrator, GrpcStatus.PERMISSION_DENIED],
      ] as const) {
        const error = await refused.mintKey({}).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(RpcError);
        expect((error as RpcError).status).toBe(status);
        expect((error as RpcError).appCode).toBeUndefined();
      }
      await expect(anonymous.getJwks({})).rejects.toMatchObject({ status: GrpcStatus.UNAUTHENTICATED });

      // The runner's listener serves the process's metrics: the service's own, its gRPC calls by status
      // code, its event consumers, and Node's.
      const text = await scrape(metrics);
      expect(sampleValue(text, 'svc_key_service_sign_ins_total', { outcome: 'verified' })).toBe(1);
      expect(sampleValue(text, 'svc_key_service_api_key_changes_total', { change: 'minted' })).toBe(1);
      expect(sampleValue(text, 'svc_key_service_outbox_pending_events')).toBeGreaterThanOrEqual(0);
      const mintKey = { grpc_service: 'svc.key.v1.KeyService', grpc_method: 'MintKey' };
      expect(sampleValue(text, 'grpc_server_handled_total', { ...mintKey, grpc_code: 'OK' })).toBe(1);
      expect(
        sampleValue(text, 'grpc_server_handled_total', { ...mintKey, grpc_code: 'UNAUTHENTICATED' }),
      ).toBe(1);
      expect(
        sampleValue(text, 'grpc_server_handled_total', { ...mintKey, grpc_code: 'PERMISSION_DENIED' }),
      ).toBe(1);
      expect(sampleValue(text, 'grpc_server_handling_seconds_count', mintKey)).toBe(3);
      expect(
        sampleValue(text, 'svc_event_subscription_live', {
          topic: 'svc.job-lifecycle.v1',
          group: 'key-service.spend-settlement',
        }),
      ).toBe(1);
      expect(sampleValue(text, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    } finally {
      closeClient(client);
      closeClient(anonymous);
      closeClient(orchestrator);
    }
    const exited = once(child!, 'exit');
    child!.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);
  });
});
