// Throughput of an authenticated `GET /v1/models` on the real gateway against a bare express handler,
// measured in the same run with the same load:
//
//   bare     express(), `GET /v1/models` answering a static JSON (express's defaults, as the baseline)
//   gateway  the gateway's app as the tests build it (startV1Gateway) over a real key-service (PostgreSQL)
//            and a real RedisStore, with the production access log at info (to /dev/null) and the production
//            limit-hit flush interval; the key is warm in the resolution cache, so each call still checks the
//            revocation marker and the per-key rate window in Redis. Its completion backend is a stub whose
//            ListModels answers a fixed list at once: the job-orchestrator is not what is measured.
//
// Every part under load runs in a process of its own, and the load generator (autocannon) too. On two cores
// that is what makes the comparison fair: a generator inside the measured process takes its event loop and
// CPU from the server (the previous benchmark's way, which understated both servers and the gap between
// them), and a server sharing a process with the coordinator would share its heap, its garbage collector
// and its event loop with the key-service and the other server. Here the coordinator (key-service, Redis
// cleanup) and the idle server only sleep while one server is measured.
//
//   npm run bench -w @svc/gateway      (PostgreSQL and Redis as for the tests)
//   BENCH_CONNECTIONS (32), BENCH_SECONDS (10), BENCH_WARMUP_SECONDS (3), BENCH_ROUNDS (3: each round
//   measures bare then gateway, and the ratio printed is the median of the rounds' ratios, so that one round
//   disturbed by something else on the machine does not decide it), BENCH_GATEWAY_LOG_LEVEL (info; `silent`
//   leaves the access log out), BENCH_PROFILE_DIR (the gateway process writes a V8 CPU profile there; it
//   slows the gateway alone, so the ratio of such a run means nothing).
//
// Besides req/s, each row shows the CPU time the server's process spent per request, and Redis's: on a
// shared machine the CPU per request moves less than req/s does, and says where the difference lies.
import { fork, type ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import express from 'express';
import { Redis } from 'ioredis';
import { createLogger, RedisStore } from '@svc/platform';
import { createTestStore, TEST_REDIS_URL } from '@svc/platform/testing';
import type { CompletionBackend, ModelListing } from '../src/v1/completion-backend.js';
import { modelJson } from '../src/v1/openai-shapes.js';
import { call } from '../test/support/http.js';
import { mintKey } from '../test/v1/support/keys.js';
import { startV1Gateway } from '../test/v1/support/v1-gateway.js';
import { startBenchKeyService } from './support/key-service.js';

const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const GATEWAY_LOG_LEVEL = process.env.BENCH_GATEWAY_LOG_LEVEL ?? 'info';
const AUTOCANNON_VERSION = '9.0.0';
/** Where the gateway process writes a V8 CPU profile (`--cpu-prof`) when set; unset, nothing is profiled. */
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR;

/** What the stub backend lists, and so what both servers answer. */
const MODELS: readonly ModelListing[] = [
  { id: 'llama3.2:1b', created: 1_700_000_000, ownedBy: 'worker-pool' },
  { id: 'qwen2.5:0.5b', created: 1_700_000_000, ownedBy: 'worker-pool' },
];
const MODELS_JSON = { object: 'list', data: MODELS.map(modelJson) };

// ---- the messages between the coordinator and its children (over the fork IPC channel) ----

type ChildRole = 'bare' | 'gateway' | 'load';

interface ServerReady {
  readonly kind: 'ready';
  readonly url: string;
}

interface LoadWaiting {
  readonly kind: 'waiting';
}

interface LoadJob {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly connections: number;
  readonly seconds: number;
}

interface LoadResult {
  readonly kind: 'result';
  readonly requestsPerSecond: number;
  readonly total: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  readonly errors: number;
}

interface CpuTime {
  readonly kind: 'cpu';
  readonly micros: number;
}

interface GatewayChildSettings {
  readonly keyServiceAddress: string;
  readonly namespace: string;
}

// ---- children ----

/** The stub completion backend: the fixed list at once, and nothing else. */
const fixedModels: CompletionBackend = {
  listModels: async () => MODELS,
  describeChain: async () => {
    throw new Error('the models benchmark reads no chain');
  },
  quoteFee: async () => {
    throw new Error('the models benchmark runs no completions');
  },
  runCompletion: () => {
    throw new Error('the models benchmark runs no completions');
  },
};

async function runBareServer(): Promise<void> {
  const app = express();
  app.get('/v1/models', (_req, res) => {
    res.json(MODELS_JSON);
  });
  const server: Server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  const stopped = stopRequested();
  await report({ kind: 'ready', url: `http://127.0.0.1:${port}` });
  await stopped;
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

async function runGatewayServer(settings: GatewayChildSettings): Promise<void> {
  // As the runtime opens it from REDIS_URL (with its writes coalesced: see RedisStoreOptions).
  const store = new RedisStore({ redis: TEST_REDIS_URL, namespace: settings.namespace });
  const gateway = await startV1Gateway({
    keyServiceAddress: settings.keyServiceAddress,
    store,
    completions: fixedModels,
    // The production logger (pino, JSON to stdout, which the coordinator sends to /dev/null).
    logger: createLogger({ service: 'gateway', level: GATEWAY_LOG_LEVEL }),
    env: {
      // High enough that nothing is refused: every call is counted in the window and answered 200.
      V1_KEY_RATE_LIMIT: String(1_000_000_000),
      // The production default, not the tests' 100 ms.
      V1_LIMIT_HIT_FLUSH_INTERVAL: '5s',
    },
  });
  const stopped = stopRequested();
  await report({ kind: 'ready', url: gateway.baseUrl });
  await stopped;
  await gateway.close();
  await store.close();
}

async function runLoad(): Promise<void> {
  // The job comes over IPC, not in argv (it carries the API key), once this process listens: a message that
  // arrives before would be lost.
  const received = new Promise<LoadJob>((resolve) =>
    process.once('message', (message) => resolve(message as LoadJob)),
  );
  await report({ kind: 'waiting' });
  const job = await received;
  const result = await autocannon({
    url: job.url,
    headers: job.headers,
    connections: job.connections,
    duration: job.seconds,
  });
  await report({
    kind: 'result',
    requestsPerSecond: result.requests.average,
    total: result.requests.total,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  });
}

function report(message: ServerReady | LoadWaiting | LoadResult): Promise<void> {
  return new Promise((resolve, reject) => {
    if (process.send === undefined) reject(new Error('run as a child of the benchmark'));
    else process.send(message, undefined, {}, (error) => (error ? reject(error) : resolve()));
  });
}

/**
 * Serves the coordinator's `cpu` questions (this process's CPU time so far, user and system) and resolves
 * at its `stop` message, or when it went away.
 */
function stopRequested(): Promise<void> {
  return new Promise((resolve) => {
    process.on('message', (message) => {
      if (message === 'stop') resolve();
      if (message === 'cpu') {
        const { user, system } = process.cpuUsage();
        process.send?.({ kind: 'cpu', micros: user + system } satisfies CpuTime);
      }
    });
    process.once('disconnect', resolve);
  });
}

function firstMessage<T>(child: ChildProcess, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`${what} exited (${code}) before it answered`));
    child.once('exit', onExit);
    child.once('message', (message) => {
      child.off('exit', onExit);
      resolve(message as T);
    });
  });
}

// Children run this same file (with the parent's --conditions and --import tsx); the role is the argument.
function spawnChild(role: ChildRole, argument?: unknown): ChildProcess {
  const args = argument === undefined ? [role] : [role, JSON.stringify(argument)];
  const profile = role === 'gateway' && PROFILE_DIR !== undefined;
  return fork(fileURLToPath(import.meta.url), args, {
    execArgv: profile
      ? [...process.execArgv, '--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`]
      : process.execArgv,
    // stdout (the gateway's access log) goes nowhere; errors still show.
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
}

interface RunningServer {
  readonly url: string;
  /** CPU time the server's process used so far, in µs. */
  cpuMicros(): Promise<number>;
  stop(): Promise<void>;
}

async function startServer(role: 'bare' | 'gateway', argument?: unknown): Promise<RunningServer> {
  const child = spawnChild(role, argument);
  const { url } = await firstMessage<ServerReady>(child, `the ${role} server`);
  return {
    url,
    cpuMicros: async () => {
      const answer = firstMessage<CpuTime>(child, `the ${role} server`);
      child.send('cpu');
      return (await answer).micros;
    },
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send('stop');
      await exited;
    },
  };
}

async function load(job: LoadJob): Promise<LoadResult> {
  const child = spawnChild('load');
  // A generous bound, so that a child that never answers fails the run instead of hanging it.
  const timeout = setTimeout(() => child.kill(), (job.seconds + 60) * 1000);
  let result: LoadResult;
  try {
    await firstMessage<LoadWaiting>(child, 'autocannon');
    const answered = firstMessage<LoadResult>(child, 'autocannon');
    child.send(job);
    result = await answered;
  } finally {
    clearTimeout(timeout);
  }
  await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(null)));
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${job.url}: ${result.non2xx} non-2xx answers and ${result.errors} errors under load`);
  return result;
}

// ---- the coordinator ----

interface Measurement extends LoadResult {
  /** CPU time (user + system) of the server's process per answered request. */
  readonly serverCpuMicrosPerRequest: number;
  /** CPU time of the Redis server per answered request (all of its clients: nothing else should run). */
  readonly redisCpuMicrosPerRequest: number;
}

/** CPU time the Redis server used so far (INFO cpu), in µs. */
async function redisCpuMicros(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const seconds = (field: string) => Number(new RegExp(`^${field}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6;
}

async function measure(server: RunningServer, redis: Redis, job: LoadJob): Promise<Measurement> {
  const [serverBefore, redisBefore] = [await server.cpuMicros(), await redisCpuMicros(redis)];
  const result = await load(job);
  const [serverAfter, redisAfter] = [await server.cpuMicros(), await redisCpuMicros(redis)];
  return {
    ...result,
    serverCpuMicrosPerRequest: (serverAfter - serverBefore) / result.total,
    redisCpuMicrosPerRequest: (redisAfter - redisBefore) / result.total,
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

async function coordinate(): Promise<void> {
  const redis = createTestStore('gw-bench');
  const admin = new Redis(TEST_REDIS_URL);
  const keyService = await startBenchKeyService(redis.open());
  const servers: RunningServer[] = [];
  try {
    const bare = await startServer('bare');
    servers.push(bare);
    const gateway = await startServer('gateway', {
      keyServiceAddress: keyService.address,
      namespace: redis.namespace,
    } satisfies GatewayChildSettings);
    servers.push(gateway);

    // A wallet signs in over /api and mints the key, as in the tests.
    const apiKey = (await mintKey(gateway.url)).key;
    const bareJob = { url: `${bare.url}/v1/models`, headers: {}, connections: CONNECTIONS };
    const gatewayJob = {
      url: `${gateway.url}/v1/models`,
      headers: { authorization: `Bearer ${apiKey}` },
      connections: CONNECTIONS,
    };

    // Both answer the same body, and the gateway only with the key.
    const fromBare = await call(bare.url, 'GET', '/v1/models');
    const fromGateway = await call(gateway.url, 'GET', '/v1/models', { token: apiKey });
    if (fromGateway.status !== 200 || fromGateway.text !== fromBare.text)
      throw new Error(
        `the gateway answered ${fromGateway.status} ${fromGateway.text}, bare ${fromBare.text}`,
      );
    const unauthenticated = await call(gateway.url, 'GET', '/v1/models');
    if (unauthenticated.status !== 401)
      throw new Error(`the gateway answered ${unauthenticated.status} without a key`);

    const [loadBefore] = loadavg();
    // Warm-up: connections, JIT, the key's cache entry and its Redis keys; not reported.
    await load({ ...bareJob, seconds: WARMUP_SECONDS });
    await load({ ...gatewayJob, seconds: WARMUP_SECONDS });

    const rounds: Array<{ bare: Measurement; gateway: Measurement }> = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      rounds.push({
        bare: await measure(bare, admin, { ...bareJob, seconds: SECONDS }),
        gateway: await measure(gateway, admin, { ...gatewayJob, seconds: SECONDS }),
      });
    }

    console.log(
      `\nGET /v1/models, ${CONNECTIONS} connections, ${SECONDS} s per case after ${WARMUP_SECONDS} s warm-up, ` +
        `loopback, ${cpus().length} CPUs (load average ${loadBefore?.toFixed(2)} before the run); ` +
        `autocannon ${AUTOCANNON_VERSION} in a process of its own, each server in its own process.`,
    );
    console.log(
      'The gateway lists models from a stub backend answering a fixed list at once: the job-orchestrator ' +
        'is not measured. Measured: HTTP, security headers, request id, access log ' +
        `(${GATEWAY_LOG_LEVEL}), API-key auth from the warm cache, revocation marker and per-key rate ` +
        'window (Redis).',
    );
    console.table(
      rounds.flatMap(({ bare: b, gateway: g }, index) =>
        (
          [
            ['bare express', b],
            ['gateway (authenticated)', g],
          ] as const
        ).map(([name, row]) => ({
          round: index + 1,
          case: name,
          'req/s': Math.round(row.requestsPerSecond),
          requests: row.total,
          'p50 ms': row.p50Ms,
          'p99 ms': row.p99Ms,
          'server CPU µs/req': Math.round(row.serverCpuMicrosPerRequest),
          'Redis CPU µs/req': Math.round(row.redisCpuMicrosPerRequest),
        })),
      ),
    );
    const ratios = rounds.map((round) => round.gateway.requestsPerSecond / round.bare.requestsPerSecond);
    const cpuRatios = rounds.map(
      (round) => round.bare.serverCpuMicrosPerRequest / round.gateway.serverCpuMicrosPerRequest,
    );
    const of = ROUNDS === 1 ? '' : ` (median of ${ROUNDS} rounds)`;
    console.log(`gateway / bare, req/s${of}: ${median(ratios).toFixed(2)}`);
    console.log(`bare / gateway, server CPU per request${of}: ${median(cpuRatios).toFixed(2)}`);
  } finally {
    for (const server of servers.reverse()) await server.stop();
    await keyService.close();
    await redis.cleanup();
    admin.disconnect();
  }
}

async function main(): Promise<void> {
  const [role, argument] = process.argv.slice(2);
  const parsed: unknown = argument === undefined ? undefined : JSON.parse(argument);
  switch (role) {
    case undefined:
      return coordinate();
    case 'bare':
      await runBareServer();
      break;
    case 'gateway':
      await runGatewayServer(parsed as GatewayChildSettings);
      break;
    case 'load':
      await runLoad();
      break;
    default:
      throw new Error(`unknown role ${role}`);
  }
  // A child's IPC channel would keep it alive.
  if (process.connected) process.disconnect();
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
