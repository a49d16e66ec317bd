import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { closeClient, createClient } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import { randomWallet } from './support/sign-in.js';
import { createTestDatabase, type TestDatabase } from '@svc/testkit';
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

/** Starts src/main.ts as a container does and resolves with the gRPC address from its "started" log line. */
function startMain(): Promise<string> {
  child = spawn(process.execPath, ['--conditions=@svc/source', '--import', 'tsx', 'src/main.ts'], {
    cwd: packageDir,
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: database.url,
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      STORE_NAMESPACE: redis.namespace,
      GRPC_HOST: '127.0.0.1',
      GRPC_PORT: '0',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! });
  return new Promise((resolve, reject) => {
    child!.once('exit', (code) => reject(new Error(`key-service exited early with code ${code}`)));
    lines.on('line', (line) => {
      const entry = JSON.parse(line) as { msg?: string; grpc?: string };
      if (entry.msg === 'key-service started' && entry.grpc) resolve(entry.grpc);
    });
  });
}

describe('main', () => {
  it('migrates, serves the KeyService over gRPC, and stops cleanly on SIGTERM', async () => {
    const address = await startMain();
    const client = createClient(KeyService, address, { defaultUnaryTimeoutMs: 10_000 });
    try {
      const wallet = randomWallet();
      const challenge = await client.createChallenge({ address: { hex: wallet.address } });
      const signed = await client.verifySignIn({
        message: challenge.message,
        signature: await wallet.signMessage(challenge.message),
      });
      const identity = await client.authenticateToken({ token: signed.token });
      expect(identity.wallet?.hex).toBe(wallet.address);
      const minted = await client.mintKey({ wallet: { hex: wallet.address } });
      expect((await client.resolveKey({ presentedKey: minted.fullKey })).keyId).toBe(minted.apiKey!.id);
    } finally {
      closeClient(client);
    }
    const exited = once(child!, 'exit');
    child!.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);
  });
});
