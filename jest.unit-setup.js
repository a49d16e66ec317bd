// Runs before each `*.unit.test.ts` file (the `unit` project of jest.preset.js). A unit test needs no
// chain, PostgreSQL, Redis, Kafka, browser or child process; this makes one that reaches for any of them
// fail at once, whatever happens to run on this machine, instead of passing here and failing elsewhere.
// A test that needs them is named `*.test.ts` and runs with `npm test`.
import * as childProcess from 'node:child_process';
import { createRequire } from 'node:module';
import { jest } from '@jest/globals';

const refusal = (what) =>
  new Error(`${what}: a unit test (*.unit.test.ts) does without it; name the file *.test.ts if it needs it`);

// Every service URL at port 1, where nothing listens: a connection is refused at once (PostgreSQL with
// ECONNREFUSED; kafkajs after its retries), and the local services are never reached by accident.
const CLOSED = '127.0.0.1:1';
Object.assign(process.env, {
  DATABASE_URL: `postgresql://unit-test@${CLOSED}/unit-test`,
  REDIS_URL: `redis://${CLOSED}`,
  KAFKA_BROKERS: CLOSED,
  RPC_URL: `http://${CLOSED}`,
  BEACON_API_URL: `http://${CLOSED}`,
});

/** Mocks a module for both `import` (ESM) and `require` (CommonJS), under each of its names. */
function refuse(specifiers, exports, moduleExports = exports) {
  for (const specifier of specifiers) {
    jest.unstable_mockModule(specifier, () => ({ ...exports, default: moduleExports }));
    jest.mock(specifier, () => moduleExports);
  }
}

// No child process: no anvil (useDevnet, startTestDevnet, @svc/anvil), helm, Chromium or server process.
const childProcessExports = Object.fromEntries(
  Object.entries(childProcess).filter(([name]) => name !== 'default'),
);
const processRefused = (name) => () => {
  throw refusal(`child_process.${name} (a child process: anvil, helm, a browser, a server)`);
};
const spawning = ['exec', 'execFile', 'execFileSync', 'execSync', 'fork', 'spawn', 'spawnSync'];
refuse(['node:child_process', 'child_process'], {
  ...childProcessExports,
  ...Object.fromEntries(spawning.map((name) => [name, processRefused(name)])),
});

// No Redis client: ioredis would otherwise retry the closed port for over a minute before a command fails.
const ioredis = createRequire(import.meta.url)('ioredis');
class RefusedRedis {
  constructor() {
    throw refusal('Redis (ioredis)');
  }
}
const redisExports = { ...ioredis, default: RefusedRedis, Redis: RefusedRedis, Cluster: RefusedRedis };
refuse(['ioredis'], redisExports, Object.assign(RefusedRedis, redisExports));
