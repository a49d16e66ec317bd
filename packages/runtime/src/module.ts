import type { ConfigOf, ConfigShape, EventBus, Logger, Store } from '@svc/platform';
import type { GrpcServer } from '@svc/proto';
import type { Registry } from 'prom-client';
import type { ChainConnection } from './dependencies/chain.js';
import type { DatabaseConnection } from './dependencies/database.js';
import type { ProcessReadiness } from './readiness.js';

/** What the runner opens once per process and hands to every module that names it. */
export interface SharedDependencies {
  /** Rate windows, leases, nonces, presence, frame streams: Redis, or the in-memory store. */
  readonly store: Store;
  /** Key and job lifecycle events: Kafka, or the in-process bus. */
  readonly bus: EventBus;
  /** PostgreSQL: a server by URL, or the embedded PGlite. */
  readonly database: DatabaseConnection;
  /** The chain: an RPC endpoint with the contracts, or the local devnet. */
  readonly chain: ChainConnection;
  /** The process's one gRPC server (with grpc.health.v1); modules add their services to it. */
  readonly grpc: GrpcServer;
  /**
   * The process's one Prometheus registry, served on METRICS_PORT with Node's process metrics, and the
   * gRPC server's calls and event consumers' health when those are open. Modules register their own
   * metrics on it, prefixed with their name (`svc_key_service_…`): in one process they share it.
   */
  readonly metrics: Registry;
}

export type Dependency = keyof SharedDependencies;

/** What a module's `build` receives: its own logger and state directory, and what it named in `needs`. */
export type ModuleDependencies<D extends Dependency> = Pick<SharedDependencies, D> & {
  readonly logger: Logger;
  /** Where this process keeps local state (the embedded database, the devnet, worker data). */
  readonly stateDir: string;
  /**
   * Whether the process should take traffic (an event consumer that died says no): a module with a
   * readiness probe of its own (the gateway's `/readyz`) asks it; gRPC health follows it already.
   */
  readonly readiness: ProcessReadiness;
};

/**
 * A built service. All start-up I/O happens in `start` (migrations, chain checks, listening, adding its
 * services to the gRPC server, subscribing); `stop` undoes it and is safe after a failed start.
 */
export interface ServiceInstance {
  start(): Promise<void>;
  stop(): Promise<void>;
  /**
   * Listeners it binds itself in `start`, beside the process's gRPC server (the job-orchestrator's worker
   * link), by name: the `host:port` a client on this machine dials, known once started.
   */
  readonly listeners?: Readonly<Record<string, string | undefined>>;
}

/** A peer's own listener, named by a setting in place of the peer's gRPC address (see `peers`). */
export interface PeerListener {
  readonly target: string;
  /** The name the peer's instance gives it in `listeners`. */
  readonly listener: string;
}

/**
 * One service, as every entry point composes it (the single-binary pattern of Grafana Loki): a name
 * that is its target, the typed configuration it reads, the shared dependencies it needs, the other
 * services it calls, and a `build` with no side effects.
 */
export interface ServiceModule<S extends ConfigShape = ConfigShape, D extends Dependency = Dependency> {
  readonly name: string;
  readonly configShape: S;
  /**
   * The shared dependencies it is handed (store, bus, database, chain, grpc, metrics): what the runner
   * opens once per process, whichever modules run there. Not other services: those are `peers`.
   */
  readonly needs: readonly D[];
  /**
   * The other services it calls, by the settings that hold their addresses: another target's gRPC
   * address by target name (`KEY_SERVICE_ADDRESS: 'key-service'`), or the address of one of its own
   * listeners (`ORCHESTRATOR_LINK: { target: 'job-orchestrator', listener: 'worker-link' }`). When that
   * target runs in the same process, the runner points the setting at it (the process's gRPC server, or
   * the listener once bound) and starts this module after it, and stops it before: the order of a
   * target's modules is derived from their peers, never from how they are listed. A cycle of peers, or
   * a peer naming no service of the deployment, is refused before anything starts.
   */
  readonly peers?: Readonly<Record<string, string | PeerListener>>;
  /**
   * Constructs the service from its configuration and dependencies: no I/O and no side effects
   * (nothing listens, connects, subscribes, reads or writes; gRPC clients connect on their first call).
   * The runner builds a unit just before starting it, once the peers it names have started.
   */
  build(config: ConfigOf<S>, dependencies: ModuleDependencies<D>): ServiceInstance;
}

/** Declares a module; only a typing aid, so `build` sees exactly the dependencies it names. */
export function defineModule<S extends ConfigShape, D extends Dependency>(
  module: ServiceModule<S, D>,
): ServiceModule<S, D> {
  return module;
}
