// What the suite runs against on this machine: a fresh PostgreSQL database, a Redis DB index of its own,
// the local Kafka broker of scripts/ensure-services.sh, and a devnet with 2-second blocks. Also how the
// suite restarts the broker and Redis for its faults.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { repoRoot } from './chart-pods.js';

export const POSTGRES_ADMIN_URL =
  process.env.CLUSTER_POSTGRES_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
export const REDIS_PORT = 6379;
export const KAFKA_BROKER = '127.0.0.1:9092';
/** The machine's command for Redis (docs/operations.md of the suite): nothing kept on disk. */
const REDIS_START = [
  '--daemonize',
  'yes',
  '--bind',
  '127.0.0.1',
  '-::1',
  '--port',
  String(REDIS_PORT),
  '--save',
  '',
  '--appendonly',
  'no',
  '--dir',
  '/var/lib/redis',
  '--logfile',
  '/var/log/redis/ci.log',
];

export function canConnect(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
    socket.setTimeout(1000, () => {
      socket.destroy();
      resolve(false);
    });
  });
}

export async function waitFor(
  what: string,
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await check()) return Date.now() - started;
    if (Date.now() - started > timeoutMs) throw new Error(`${what}: not within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

// --- Kafka ------------------------------------------------------------------------------------------

function kafkaHome(): string {
  if (process.env.SVC_KAFKA_HOME) return process.env.SVC_KAFKA_HOME;
  const pom = readFileSync(join(repoRoot, 'scripts', 'kafka', 'pom.xml'), 'utf8');
  const version = /<kafka.version>(.*)<\/kafka.version>/.exec(pom)?.[1];
  const cache = process.env.XDG_CACHE_HOME ?? join(process.env.HOME ?? homedir(), '.cache');
  return join(cache, 'svc', 'kafka', version ?? 'unknown');
}

/** The broker's pid, from the pid file scripts/ensure-services.sh writes. */
function kafkaPid(): number | undefined {
  const file = join(kafkaHome(), 'broker.pid');
  if (!existsSync(file)) return undefined;
  const pid = Number(readFileSync(file, 'utf8').trim());
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return cmdline.includes('kafka.Kafka') ? pid : undefined;
  } catch {
    return undefined;
  }
}

export async function stopKafka(): Promise<void> {
  const pid = kafkaPid();
  if (pid === undefined)
    throw new Error(`no Kafka broker of scripts/ensure-services.sh runs (${kafkaHome()}/broker.pid)`);
  process.kill(pid, 'SIGTERM');
  await waitFor('the Kafka broker to stop', () => !existsSync(`/proc/${pid}`), 60_000).catch(() => {
    process.kill(pid, 'SIGKILL');
  });
}

/** Starts the broker again the way CI does, and waits until it serves requests. */
export function startKafka(): void {
  const result = spawnSync('bash', [join(repoRoot, 'scripts', 'ensure-services.sh')], { encoding: 'utf8' });
  if (result.status !== 0)
    throw new Error(`scripts/ensure-services.sh failed:\n${result.stdout}${result.stderr}`);
}

// --- Redis ------------------------------------------------------------------------------------------

export function redisUp(): boolean {
  const result = spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(REDIS_PORT), 'ping'], {
    encoding: 'utf8',
  });
  return result.stdout.trim() === 'PONG';
}

export function stopRedis(): void {
  spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', String(REDIS_PORT), 'shutdown', 'nosave'], {
    encoding: 'utf8',
  });
}

export function startRedis(): void {
  execFileSync('redis-server', REDIS_START, { stdio: 'ignore' });
}
