import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { EmbeddedEventBus, env, KafkaEventBus, MemoryStore, RedisStore, createLogger } from '@svc/platform';
import { createTestDatabase, type TestDatabase } from '@svc/testkit';
import { TEST_REDIS_URL } from '@svc/platform/testing';
import type { ServiceImpl } from '@svc/proto';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import pg from 'pg';
import { defineModule, runTarget, type RunningTarget, type SharedDependencies } from '../src/index.js';

// The runner opens each shared dependency from its URL, or its embedded default when the URL is
// unset, for whatever target it runs; modules see exactly what they named.

const logger = createLogger({ service: 'runner-test', level: 'silent' });

/** A module that needs everything and records what it was given and when it ran. */
function probeModule(name: string, events: string[], failOnStart = false) {
  let seen: Partial<SharedDependencies> = {};
  const module = defineModule({
    name,
    configShape: { PEER_ADDRESS: env.optionalString({ doc: 'where the peer listens' }) },
    needs: ['store', 'bus', 'database', 'chain', 'grpc'],
    peers: { PEER_ADDRESS: 'peer' },
    build(config, dependencies) {
      seen = dependencies;
      events.push(`${name} built (peer at ${config.PEER_ADDRESS ?? 'none'})`);
      return {
        async start() {
          if (failOnStart) throw new Error(`${name} refused to start`);
          events.push(`${name} started`);
        },
        async stop() {
          events.push(`${name} stopped`);
        },
      };
    },
  });
  return { module, seen: () => seen };
}

const peer = defineModule({
  name: 'peer',
  configShape: {},
  needs: ['grpc'],
  build: () => ({ start: async () => {}, stop: async () => {} }),
});

describe('runTarget', () => {
  let stateDir: string;
  let database: TestDatabase;
  let embedded: RunningTarget | undefined;
  const events: string[] = [];
  const probe = probeModule('probe', events);

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'svc-runner-'));
    database = await createTestDatabase({ prefix: 'runner' });
  });

  afterAll(async () => {
    await embedded?.stop();
    await database?.drop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('opens the embedded default of every dependency when no URL is set', async () => {
    embedded = await runTarget(
      { name: 'embedded', modules: [probe.module, peer] },
      { env: { STATE_DIR: stateDir, GRPC_PORT: '0', DEVNET_PORT: '0' }, logger },
    );
    const seen = probe.seen();
    expect(seen.store).toBeInstanceOf(MemoryStore);
    expect(seen.bus).toBeInstanceOf(EmbeddedEventBus);
    expect(seen.database?.kind).toBe('embedded');
    if (seen.database?.kind !== 'embedded') throw new Error('unreachable');
    expect(seen.database.dataDir).toBe(join(stateDir, 'postgres'));
    expect((await seen.database.pglite.query<{ one: number }>('select 1 as one')).rows).toEqual([{ one: 1 }]);
    expect(seen.chain?.devnet?.accounts.some((account) => account.role === 'worker')).toBe(true);
    // The peer runs in this process, so the probe was pointed at the process's own gRPC server.
    expect(events).toContain(`probe built (peer at ${embedded.grpcAddress})`);
  }, 60_000);

  it('switches each dependency to the real one when its URL is set', async () => {
    const devnet = embedded!.dependencies.chain!;
    const running = await runTarget(
      { name: 'real', modules: [probe.module] },
      {
        env: {
          STATE_DIR: stateDir,
          GRPC_PORT: '0',
          DATABASE_URL: database.url,
          REDIS_URL: TEST_REDIS_URL,
          STORE_NAMESPACE: `runner-test-${process.pid}`,
          // No broker runs here; the runner only builds the client, it connects on first use.
          KAFKA_BROKERS: '127.0.0.1:1',
          RPC_URL: devnet.rpcUrl,
          JOB_REGISTRY_ADDRESS: devnet.contracts.jobRegistry,
          WORKER_REGISTRY_ADDRESS: devnet.contracts.workerRegistry,
        },
        logger,
      },
    );
    try {
      const seen = probe.seen();
      expect(seen.store).toBeInstanceOf(RedisStore);
      await seen.store!.ping();
      expect(seen.bus).toBeInstanceOf(KafkaEventBus);
      expect(seen.database).toEqual({ kind: 'server', url: database.url });
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      await client.end();
      expect(seen.chain).toMatchObject({ rpcUrl: devnet.rpcUrl, chainId: devnet.chainId, devnet: null });
      expect(seen.chain?.contracts.jobRegistry).toBe(devnet.contracts.jobRegistry);
      // Its peer does not run here: the setting keeps its own value (unset).
      expect(events.at(-2)).toBe('probe built (peer at none)');
    } finally {
      await running.stop();
    }
  }, 60_000);

  it('refuses a chain whose id is not CHAIN_ID', async () => {
    const devnet = embedded!.dependencies.chain!;
    await expect(
      runTarget(
        { name: 'wrong-chain', modules: [probe.module] },
        {
          env: {
            STATE_DIR: stateDir,
            GRPC_PORT: '0',
            RPC_URL: devnet.rpcUrl,
            CHAIN_ID: '5',
            JOB_REGISTRY_ADDRESS: devnet.contracts.jobRegistry,
            WORKER_REGISTRY_ADDRESS: devnet.contracts.workerRegistry,
          },
          logger,
        },
      ),
    ).rejects.toThrow(`CHAIN_ID is 5, but ${devnet.rpcUrl} serves chain ${devnet.chainId}`);
  });

  it('stops what started, and the module that failed to start, in reverse order', async () => {
    const failing: string[] = [];
    const first = probeModule('first', failing);
    const second = probeModule('second', failing, true);
    const devnet = embedded!.dependencies.chain!;
    await expect(
      runTarget(
        { name: 'failing', modules: [first.module, second.module] },
        {
          env: {
            STATE_DIR: stateDir,
            GRPC_PORT: '0',
            DATABASE_URL: database.url,
            RPC_URL: devnet.rpcUrl,
            JOB_REGISTRY_ADDRESS: devnet.contracts.jobRegistry,
            WORKER_REGISTRY_ADDRESS: devnet.contracts.workerRegistry,
          },
          logger,
        },
      ),
    ).rejects.toThrow('second refused to start');
    expect(failing).toEqual([
      'first built (peer at none)',
      'first started',
      'second built (peer at none)',
      'second stopped',
      'first stopped',
    ]);
    // The dependencies it opened were closed too: the memory store refuses work once closed.
    await expect(first.seen().store!.ping()).rejects.toThrow();
  });

  it("points a setting that names a peer's own listener at it once the peer started, and keeps the environment's when the peer runs elsewhere", async () => {
    const seen: string[] = [];
    const listening = defineModule({
      name: 'listening',
      configShape: {},
      needs: [],
      build: () => {
        let address: string | undefined;
        return {
          get listeners() {
            return { side: address };
          },
          // Bound in start, as the job-orchestrator binds its worker link.
          start: async () => {
            address = '127.0.0.1:4242';
          },
          stop: async () => {},
        };
      },
    });
    const dialling = defineModule({
      name: 'dialling',
      configShape: { SIDE_ADDRESS: env.optionalString({ doc: "the peer's side listener" }) },
      needs: [],
      peers: { SIDE_ADDRESS: { target: 'listening', listener: 'side' } },
      build: (config) => {
        seen.push(config.SIDE_ADDRESS ?? 'none');
        return { start: async () => {}, stop: async () => {} };
      },
    });
    const options = { env: { STATE_DIR: stateDir, SIDE_ADDRESS: '10.0.0.1:50052' }, logger };
    await (await runTarget({ name: 'together', modules: [listening, dialling] }, options)).stop();
    await (await runTarget({ name: 'apart', modules: [dialling] }, options)).stop();
    // Listed first, the dialling module still starts after its peer: the order comes from the peers.
    await (await runTarget({ name: 'listed-first', modules: [dialling, listening] }, options)).stop();
    expect(seen).toEqual(['127.0.0.1:4242', '10.0.0.1:50052', '127.0.0.1:4242']);
  });

  it('reports every configuration problem of every module at once', async () => {
    const strict = defineModule({
      name: 'strict',
      configShape: {
        A_PORT: env.port({ doc: 'a' }),
        B_COUNT: env.int({ doc: 'b', min: 1 }),
      },
      needs: [],
      build: () => ({ start: async () => {}, stop: async () => {} }),
    });
    await expect(
      runTarget({ name: 'strict', modules: [strict] }, { env: { A_PORT: 'x', B_COUNT: '0' }, logger }),
    ).rejects.toThrow(/strict: A_PORT must be an integer[\s\S]*strict: B_COUNT must be an integer/);
  });

  it("refuses to serve a service whose module does not say who may call it on the process's gRPC server", async () => {
    const stub = new Proxy({}, { get: () => async () => ({}) }) as ServiceImpl<
      (typeof JobOrchestrator)['method']
    >;
    const careless = defineModule({
      name: 'careless',
      configShape: {},
      needs: ['grpc'],
      build: (_config, { grpc }) => ({
        start: async () => {
          grpc.add(JobOrchestrator, stub);
        },
        stop: async () => {},
      }),
    });
    await expect(
      runTarget({ name: 'careless', modules: [careless] }, { env: { GRPC_PORT: '0' }, logger }),
    ).rejects.toThrow(/svc.orchestrator.v1.JobOrchestrator: say who may call it/);
  });

  it('derives settings after --reset, under STATE_DIR, without overriding the environment; --reset keeps logs/', async () => {
    const derivedDir = mkdtempSync(join(tmpdir(), 'svc-derive-'));
    writeFileSync(join(derivedDir, 'left-over'), 'from an earlier run');
    mkdirSync(join(derivedDir, 'logs'));
    writeFileSync(join(derivedDir, 'logs', 'server.log'), 'being written by the launcher');
    const seen: Array<Record<string, string | undefined>> = [];
    const reader = defineModule({
      name: 'reader',
      configShape: {
        FROM_STATE: env.string({ doc: 'derived from a file under STATE_DIR' }),
        CHOSEN: env.string({ doc: 'set by the environment' }),
      },
      needs: [],
      build: (config) => {
        seen.push(config);
        return { start: async () => {}, stop: async () => {} };
      },
    });
    const running = await runTarget(
      {
        name: 'deriving',
        modules: [reader],
        keptOnReset: ['logs'],
        derive: (_env, { stateDir: dir }) => ({
          FROM_STATE: existsSync(join(dir, 'left-over')) ? 'stale' : 'fresh',
          CHOSEN: 'derived',
        }),
      },
      { env: { STATE_DIR: derivedDir, CHOSEN: 'operator' }, reset: true, logger },
    );
    await running.stop();
    const log = readFileSync(join(derivedDir, 'logs', 'server.log'), 'utf8');
    rmSync(derivedDir, { recursive: true, force: true });
    expect(seen).toEqual([{ FROM_STATE: 'fresh', CHOSEN: 'operator' }]);
    expect(log).toBe('being written by the launcher');
  });
});
