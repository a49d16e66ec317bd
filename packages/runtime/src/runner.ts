import { existsSync, readdirSync, rmSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import {
  ConfigError,
  createLogger,
  createServiceGrpcServer,
  loadConfig,
  startTracing,
  tracingSettings,
  type ConfigShape,
  type Logger,
} from '@svc/platform';
import { runtimeConfigShape, type RuntimeConfig } from './config.js';
import { openChain } from './dependencies/chain.js';
import { openDatabase } from './dependencies/database.js';
import { openEventBus } from './dependencies/event-bus.js';
import { eventSubscriptionMetrics, grpcServerMetrics, openMetrics } from './dependencies/metrics.js';
import { openStore } from './dependencies/store.js';
import type { Dependency, ServiceInstance, ServiceModule, SharedDependencies } from './module.js';
import { eventBusReadiness, GrpcReadinessMonitor, type ProcessReadiness } from './readiness.js';
import { checkPeers, startOrder } from './start-order.js';

/** One module to run, possibly several times in one process (the all-in-one target's workers). */
export interface Unit {
  readonly module: ServiceModule;
  /** Distinguishes instances of one module in logs (`worker-1`); default: the module's name. */
  readonly name?: string;
  /** Settings of this instance only, over the process's environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Defaults of this instance only, under the process's environment. */
  readonly defaults?: Readonly<Record<string, string>>;
}

/** What one process runs: a single service (a container), or `all` (`npm start`). */
export interface Target {
  readonly name: string;
  /**
   * The modules it runs, in any order; together they decide which shared dependencies are opened. Each
   * starts after the modules its `peers` name that run here too, and stops before them.
   */
  readonly modules: readonly ServiceModule[];
  /**
   * Every service of the deployment by name, when the target knows them (the runner's own targets do): a
   * peer naming none of them, nor a module of this target, is refused before anything starts. Unset, a
   * peer that does not run here is taken for a service running in another process.
   */
  readonly services?: readonly string[];
  /** Defaults of this target, under the environment (the all-in-one target binds gRPC to a free port). */
  readonly defaults?: Readonly<Record<string, string>>;
  /**
   * Settings derived before any module reads them (PUBLIC_URL from PORT, secrets kept under STATE_DIR); a
   * setting the environment has is the environment's. Runs after `--reset`.
   */
  readonly derive?: (
    env: Readonly<Record<string, string | undefined>>,
    context: { readonly stateDir: string },
  ) => Record<string, string>;
  /**
   * The instances to run once the dependencies are open, in any order (each starts after the units of
   * the peers it names); default one per module.
   */
  readonly units?: (dependencies: Partial<SharedDependencies>, runtime: RuntimeConfig) => Unit[];
  /** The all-in-one target: creates a missing database on DATABASE_URL's server. */
  readonly allInOne?: boolean;
  /**
   * Runs once every instance started (the gateway answers); what it returns runs first on stop. The
   * all-in-one target writes the stack file here.
   */
  readonly started?: (running: RunningTarget) => Promise<(() => Promise<void>) | void>;
  /** Entries of STATE_DIR that `--reset` keeps (what others write there, such as a launcher's logs). */
  readonly keptOnReset?: readonly string[];
}

export interface RunOptions {
  readonly env?: NodeJS.ProcessEnv;
  /** Empties STATE_DIR before starting (`--reset`). */
  readonly reset?: boolean;
  readonly logger?: Logger;
  /**
   * Dependencies the caller already holds, used instead of opening them (and left open on stop):
   * replicas in one test sharing a bus, a store shared with the code under test.
   */
  readonly provided?: Partial<SharedDependencies>;
  /** How often gRPC health follows the process's readiness; default 1 s. */
  readonly readinessIntervalMs?: number;
}

export interface RunningTarget {
  readonly target: string;
  readonly logger: Logger;
  readonly dependencies: Partial<SharedDependencies>;
  /** `host:port` of the process's gRPC server, when one runs. */
  readonly grpcAddress: string | undefined;
  /** `http://host:port/metrics` of the process's metrics listener, when one runs. */
  readonly metricsUrl: string | undefined;
  readonly stateDir: string;
  /** The running instances by unit name (a module's instance type says what else it exposes). */
  readonly instances: ReadonlyMap<string, ServiceInstance>;
  /** Whether the process should take traffic (what `/readyz` and grpc.health.v1 report). */
  readonly readiness: ProcessReadiness;
  /** Stops every instance (last started first), then the shared dependencies; safe to call twice. */
  stop(): Promise<void>;
}

/**
 * The target that runs one service alone, as a container runs it, named after it. `services`: every
 * service of the deployment, so that a peer naming none of them is refused.
 */
export function serviceTarget(module: ServiceModule, options: { services?: readonly string[] } = {}): Target {
  return {
    name: module.name,
    modules: [module],
    ...(options.services ? { services: options.services } : {}),
  };
}

type Closer = { name: string; close: () => Promise<void> };

/**
 * Runs a target: checks its modules' peers (no unknown peer, no cycle), opens the shared dependencies
 * its modules need (each with its embedded default), loads every unit's configuration from one
 * environment, then builds and starts each unit in turn, every unit after the units of the peers it
 * names. A failed start stops every unit that began starting (the failed one too) and closes what was
 * opened, then rethrows.
 */
export async function runTarget(target: Target, options: RunOptions = {}): Promise<RunningTarget> {
  const started = Date.now();
  checkPeers(target.modules, target.services);
  const userEnv = options.env ?? process.env;
  const baseEnv: Record<string, string | undefined> = { ...target.defaults, ...withoutEmpty(userEnv) };
  const runtime = loadConfig(runtimeConfigShape, baseEnv);
  const logger = options.logger ?? createLogger({ service: target.name, level: runtime.LOG_LEVEL });
  const stateDir = isAbsolute(runtime.STATE_DIR) ? runtime.STATE_DIR : resolve(runtime.STATE_DIR);
  if (options.reset) {
    resetStateDir(stateDir, new Set(target.keptOnReset));
    logger.info({ stateDir }, 'state reset: starting from scratch');
  }
  for (const [setting, value] of Object.entries(target.derive?.(baseEnv, { stateDir }) ?? {}))
    baseEnv[setting] ??= value;

  const closers: Closer[] = [];
  const closeAll = once(async () => {
    for (const { name, close } of closers.reverse()) {
      try {
        await close();
      } catch (error) {
        logger.error({ err: error, closer: name }, 'failed to close');
      }
    }
  });

  try {
    // First, so it closes last: the spans of everything that stops are exported before the process ends.
    const tracing = startTracing(tracingSettings(runtime, target.name));
    if (tracing.enabled) closers.push({ name: 'tracing', close: tracing.shutdown });
    const needs = new Set<Dependency>(target.modules.flatMap((module) => module.needs));
    const dependencies: { -readonly [K in Dependency]?: SharedDependencies[K] } = { ...options.provided };
    for (const provided of Object.keys(options.provided ?? {})) needs.delete(provided as Dependency);
    let metricsUrl: string | undefined;
    if (needs.has('metrics')) {
      // First: the gRPC server and the bus opened next report into it.
      const metrics = await openMetrics(runtime, logger);
      closers.push({ name: 'metrics listener', close: metrics.close });
      dependencies.metrics = metrics.registry;
      metricsUrl = `http://${loopbackFor(runtime.METRICS_HOST)}:${metrics.port}/metrics`;
    }
    // The chain and the database open side by side (a devnet deploying while an embedded database
    // initializes, on a first start); each one that opened is closed again if the other failed.
    const [chain, database] = await Promise.allSettled([
      needs.has('chain') ? openChain(runtime, stateDir, logger) : undefined,
      needs.has('database')
        ? openDatabase(runtime, {
            embeddedDir: join(stateDir, 'postgres'),
            createIfMissing: target.allInOne === true,
            logger,
          })
        : undefined,
    ]);
    if (chain.status === 'fulfilled' && chain.value) {
      closers.push({ name: 'chain', close: chain.value.close });
      dependencies.chain = chain.value.connection;
    }
    if (database.status === 'fulfilled' && database.value) {
      closers.push({ name: 'database', close: database.value.close });
      dependencies.database = database.value.connection;
    }
    if (chain.status === 'rejected') throw chain.reason;
    if (database.status === 'rejected') throw database.reason;
    if (needs.has('store')) {
      const store = openStore(runtime, logger);
      closers.push({ name: 'store', close: () => store.close() });
      dependencies.store = store;
    }
    if (needs.has('bus')) {
      const bus = openEventBus(
        { ...runtime, KAFKA_CLIENT_ID: runtime.KAFKA_CLIENT_ID ?? `svc-${target.name}` },
        logger,
      );
      closers.push({ name: 'event bus', close: () => bus.close() });
      dependencies.bus = bus;
    }
    if (dependencies.metrics && dependencies.bus)
      eventSubscriptionMetrics(dependencies.metrics, dependencies.bus);
    let grpcAddress: string | undefined;
    if (needs.has('grpc')) {
      // Every module says who may call each service it adds (a service token's callers, or open).
      const grpc = createServiceGrpcServer(logger, {
        requireAccess: true,
        channelOptions: connectionAgeOptions(runtime.GRPC_MAX_CONNECTION_AGE),
        ...(dependencies.metrics ? { onCallEnd: grpcServerMetrics(dependencies.metrics) } : {}),
      });
      const port = await grpc.listen(`${runtime.GRPC_HOST}:${runtime.GRPC_PORT}`, { serving: false });
      closers.push({ name: 'gRPC server', close: () => grpc.shutdown() });
      dependencies.grpc = grpc;
      grpcAddress = `${loopbackFor(runtime.GRPC_HOST)}:${port}`;
    }

    const readiness = eventBusReadiness(dependencies.bus);
    const env = moduleEnvironment(target, baseEnv, dependencies, grpcAddress);
    const units = unitsInStartOrder(
      target,
      target.units?.(dependencies, runtime) ?? target.modules.map((module) => ({ module })),
    );
    checkConfigs(units, env);
    const built: BuiltUnit[] = [];
    for (const unit of units) {
      // Built just before it starts: the listeners of the peers it named (started before it) are bound.
      const unitEnv = { ...env, ...peerListenerSettings(unit.module, target, built) };
      const name = unit.name ?? unit.module.name;
      const instance = buildUnit(unit, unitEnv, dependencies, options.logger, runtime, stateDir, readiness);
      built.push({ name, module: unit.module, instance });
      // Registered before it starts: a start that fails half way is stopped too (stop is safe then).
      closers.push({ name, close: () => instance.stop() });
      await instance.start();
    }
    dependencies.grpc?.announceServing();
    if (dependencies.grpc && dependencies.bus) {
      // Stopped first on stop (closers run last in, first out), before the gRPC server shuts down.
      const monitor = new GrpcReadinessMonitor(
        dependencies.grpc,
        readiness,
        logger,
        options.readinessIntervalMs ?? 1_000,
      );
      monitor.start();
      closers.push({ name: 'readiness monitor', close: async () => monitor.stop() });
    }
    const instances = new Map(built.map(({ name, instance }) => [name, instance]));
    const running: RunningTarget = {
      target: target.name,
      logger,
      dependencies,
      grpcAddress,
      metricsUrl,
      stateDir,
      instances,
      readiness,
      stop: closeAll,
    };
    const cleanup = await target.started?.(running);
    if (cleanup) closers.push({ name: `${target.name} started hook`, close: cleanup });
    logger.info(
      {
        target: target.name,
        units: built.map(({ name }) => name),
        grpc: grpcAddress,
        metrics: metricsUrl,
        ms: Date.now() - started,
      },
      `${target.name} started`,
    );
    return running;
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/**
 * One environment for every module: the process's, the chain's id when a chain is open (a sign-in
 * message must name the chain the wallets use), and peers' addresses when they run in this process.
 */
function moduleEnvironment(
  target: Target,
  baseEnv: Record<string, string | undefined>,
  dependencies: Partial<SharedDependencies>,
  grpcAddress: string | undefined,
): Record<string, string | undefined> {
  const env = { ...baseEnv };
  if (dependencies.chain) env.CHAIN_ID = String(dependencies.chain.chainId);
  const local = new Set(target.modules.map((module) => module.name));
  for (const module of target.modules) {
    for (const [setting, peer] of Object.entries(module.peers ?? {})) {
      if (typeof peer === 'string' && local.has(peer) && grpcAddress) env[setting] = grpcAddress;
    }
  }
  return env;
}

type BuiltUnit = { name: string; module: ServiceModule; instance: ServiceInstance };

/**
 * The target's units in the order they start: each after the units of the peers it names that run in
 * this process. A unit naming a listener of a module of this target that has no unit is refused.
 */
function unitsInStartOrder(target: Target, units: readonly Unit[]): Unit[] {
  const local = new Set(target.modules.map((module) => module.name));
  const running = new Set(units.map((unit) => unit.module.name));
  const problems: string[] = [];
  for (const unit of units)
    for (const [setting, peer] of Object.entries(unit.module.peers ?? {}))
      if (typeof peer !== 'string' && local.has(peer.target) && !running.has(peer.target))
        problems.push(
          `${unit.name ?? unit.module.name}: ${setting} names a listener of ${peer.target}, which this process runs no instance of`,
        );
  if (problems.length > 0) throw new ConfigError(problems);
  return startOrder(units, local);
}

/**
 * A unit's settings that name a listener of a peer running in this process (the workers'
 * ORCHESTRATOR_LINK), pointed at it: the peer started first (`unitsInStartOrder`), so it is bound.
 */
function peerListenerSettings(
  module: ServiceModule,
  target: Target,
  started: readonly BuiltUnit[],
): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const [setting, peer] of Object.entries(module.peers ?? {})) {
    if (typeof peer === 'string' || !target.modules.some((local) => local.name === peer.target)) continue;
    const running = started.find((unit) => unit.module.name === peer.target);
    // Unreachable: the peer's units start first, and a peer with none is refused before anything starts.
    if (!running)
      throw new Error(`${module.name}: ${setting} names a listener of ${peer.target}, not started`);
    const address = running.instance.listeners?.[peer.listener];
    if (address) settings[setting] = address;
  }
  return settings;
}

/** Loads every unit's configuration before any is built, so an operator sees every problem at once. */
function checkConfigs(units: readonly Unit[], env: Record<string, string | undefined>): void {
  const problems: string[] = [];
  for (const unit of units) {
    try {
      loadUnitConfig(unit, env);
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      problems.push(...error.problems.map((problem) => `${unit.name ?? unit.module.name}: ${problem}`));
    }
  }
  if (problems.length > 0) throw new ConfigError(problems);
}

/** A unit's configuration: its own settings over the process's, over its defaults. */
function loadUnitConfig(unit: Unit, env: Record<string, string | undefined>): unknown {
  return loadConfig(unit.module.configShape as ConfigShape, { ...unit.defaults, ...env, ...unit.env });
}

/** Builds one unit; its configuration is loaded again, now with its peers' listeners. */
function buildUnit(
  unit: Unit,
  env: Record<string, string | undefined>,
  dependencies: Partial<SharedDependencies>,
  parentLogger: Logger | undefined,
  runtime: RuntimeConfig,
  stateDir: string,
  readiness: ProcessReadiness,
): ServiceInstance {
  const name = unit.name ?? unit.module.name;
  const config = loadUnitConfig(unit, env);
  const logger =
    parentLogger?.child({ unit: name }) ?? createLogger({ service: name, level: runtime.LOG_LEVEL });
  const granted: Record<string, unknown> = { logger, stateDir, readiness };
  for (const need of unit.module.needs) granted[need] = dependencies[need];
  return unit.module.build(config as never, granted as never);
}

/**
 * Server options that retire each client connection after `maxAgeMs` (0: never). No grace period (grpc-js
 * then never forces the connection closed): a completion stream has no deadline, so the calls on a
 * retired connection run to their end. Clients keep them alive too: see `stopKeepaliveAfterGoaway`.
 */
export function connectionAgeOptions(maxAgeMs: number): Record<string, number> {
  return maxAgeMs > 0 ? { 'grpc.max_connection_age_ms': maxAgeMs } : {};
}

function withoutEmpty(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter(
      (entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== '',
    ),
  );
}

/**
 * The host a client on this machine dials for a server bound to `host`: loopback for the wildcard
 * addresses, an IPv6 literal in brackets (ready for `host:port` and URLs).
 */
export function loopbackFor(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

function once(action: () => Promise<void>): () => Promise<void> {
  let result: Promise<void> | undefined;
  return () => (result ??= action());
}

/** Empties STATE_DIR but for the entries the target keeps. */
function resetStateDir(stateDir: string, kept: ReadonlySet<string>): void {
  if (!existsSync(stateDir)) return;
  for (const entry of readdirSync(stateDir))
    if (!kept.has(entry)) rmSync(join(stateDir, entry), { recursive: true, force: true });
}
