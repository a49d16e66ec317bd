import { devnetConfigShape } from '@svc/devnet';
import { env, tracingConfigShape, type ConfigOf } from '@svc/platform';
import { DEFAULT_STATE_DIR } from './state-dir.js';

/**
 * The settings of the runner itself, the same for every target: logging, the process's gRPC server and
 * metrics listener, and the shared dependencies. Each dependency has an embedded default used while its URL is unset.
 */
export const runtimeConfigShape = {
  LOG_LEVEL: env.oneOf({
    doc: 'Least severe log level written.',
    values: ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const,
    default: 'info',
  }),
  STATE_DIR: env.string({
    doc: 'Directory of local state: the embedded database, the devnet chain, the all-in-one workers. `--reset` empties it (`npm start` keeps its `logs/`). Relative paths are from the working directory.',
    default: DEFAULT_STATE_DIR,
    defaultText: '<checkout>/.dev',
  }),
  GRPC_HOST: env.string({
    doc: "Interface of this process's gRPC server (the services it runs, and grpc.health.v1). Expose it only to the other services (Kubernetes: 0.0.0.0 behind a NetworkPolicy).",
    default: '127.0.0.1',
  }),
  GRPC_PORT: env.port({
    doc: "Port of this process's gRPC server; 0 picks a free one (the all-in-one target does when unset).",
    default: 50051,
  }),
  SHUTDOWN_TIMEOUT: env.durationMs({
    doc: 'How long a stopping process (SIGTERM, SIGINT) gives its services to stop (calls draining, events handed on, connections closed) before it exits anyway. Keep it above the services’ own drain times (DRAIN_TIMEOUT) and below the pod’s termination grace period: the chart sets it 5 s below `terminationGracePeriodSeconds`.',
    default: '60s',
  }),
  GRPC_MAX_CONNECTION_AGE: env.durationMs({
    doc: "How long a client connection to this process's gRPC server lives before the server asks the client to reconnect (a GOAWAY, ±10% jitter; calls in flight finish first, however long). Reconnecting makes clients look the peer's name up again, so replicas an autoscaler added start taking calls; `0` never asks.",
    default: '5m',
  }),
  METRICS_HOST: env.string({
    doc: "Interface of this process's metrics listener (`GET /metrics`, Prometheus text, no auth), opened when it runs a service other than workers (which serve theirs on HEALTH_PORT). Loopback by default; a container sets 0.0.0.0 so Prometheus reaches it, and keeps the port closed to everything else.",
    default: '127.0.0.1',
  }),
  METRICS_PORT: env.port({
    doc: "Port of this process's metrics listener, apart from the public and gRPC ports; in the all-in-one target one listener serves every service's metrics. 0 picks a free one (the all-in-one target does when unset).",
    default: 9465,
  }),

  DATABASE_URL: env.url({
    doc: 'PostgreSQL connection URL; unset runs an embedded PostgreSQL (PGlite) in the process, its data under STATE_DIR/postgres.',
    protocols: ['postgres', 'postgresql'],
    secret: true,
  }),
  REDIS_URL: env.redisUrl({
    doc: 'Redis shared by every replica (limits, nonces, revocation markers, presence, frame streams); unset uses an in-memory store in the process. One server: `redis://[user:password@]host:port[/db]` (`rediss://` for TLS). A Redis Cluster: `redis+cluster://[user:password@]host:port,host:port,…` (`rediss+cluster://` for TLS), naming any of its nodes (the client finds the rest; no database number).',
    secret: true,
  }),
  STORE_NAMESPACE: env.string({
    doc: 'Key prefix in Redis; every service of one deployment uses the same one.',
    default: 'svc',
  }),
  KAFKA_BROKERS: env.optionalString({
    doc: 'Kafka brokers (host:port, comma-separated) for key and job lifecycle events; unset uses an in-process bus.',
  }),
  KAFKA_CLIENT_ID: env.optionalString({ doc: 'Kafka client id. Default: `svc-<target>`.' }),
  KAFKA_SSL: env.bool({
    doc: 'TLS to the Kafka brokers, verified against the system CAs (add a private CA with NODE_EXTRA_CA_CERTS).',
    default: false,
  }),
  KAFKA_SASL_MECHANISM: env.oneOf({
    doc: 'SASL mechanism of the Kafka brokers; `none` connects without SASL. The others need KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD.',
    values: ['none', 'plain', 'scram-sha-256', 'scram-sha-512'] as const,
    default: 'none',
  }),
  KAFKA_SASL_USERNAME: env.optionalString({ doc: 'SASL user name for the Kafka brokers.' }),
  KAFKA_SASL_PASSWORD: env.optionalString({ doc: 'SASL password for the Kafka brokers.', secret: true }),
  KAFKA_PUBLISH_TIMEOUT: env.durationMs({
    doc: 'How long publishing an event waits for the brokers to acknowledge it (connecting included, and waiting behind the previous send of its topic, which goes first; a publish that times out before its send started is never sent) before it fails with PublishTimeoutError; the caller then retries or leaves it to its fallback (the key-event outbox keeps the event, the reservation TTL settles a spend). Keep it below 20s, the key-service transaction the outbox relay publishes in.',
    default: '5s',
  }),
  KAFKA_JOIN_TIMEOUT: env.durationMs({
    doc: 'How long an event consumer may take to join its consumer group. At start-up a consumer that has not joined by then fails its subscription; later, a consumer out of its group for longer (the brokers unreachable) is reported `reconnecting` and logged, and its service stays ready. Only a consumer that crashed for good makes its service not ready (`/readyz` 503, gRPC health NOT_SERVING).',
    default: '60s',
  }),
  KAFKA_TOPIC_REPLICATION_FACTOR: env.int({
    doc: 'Replicas of each partition of the topics a service creates (`svc.job-lifecycle.v1`, `svc.key-events.v1`); 1 for a single-broker development cluster. Existing topics are left as they are.',
    default: 3,
    min: 1,
  }),
  KAFKA_TOPIC_MIN_INSYNC_REPLICAS: env.optionalInt({
    doc: '`min.insync.replicas` of the topics a service creates: replicas that must have an event before a publish (acks=all) succeeds; at most KAFKA_TOPIC_REPLICATION_FACTOR. Default: the replication factor minus one, at least 1.',
    min: 1,
  }),
  KAFKA_JOB_LIFECYCLE_PARTITIONS: env.int({
    doc: 'Partitions of `svc.job-lifecycle.v1` when a service creates it: at most this many key-service replicas share the spend settlement. Fixed once created.',
    default: 12,
    min: 1,
  }),
  KAFKA_JOB_LIFECYCLE_RETENTION: env.durationMs({
    doc: '`retention.ms` of `svc.job-lifecycle.v1` when a service creates it: how long a stopped consumer group may lag before it loses events.',
    default: '168h',
  }),
  KAFKA_KEY_EVENTS_PARTITIONS: env.int({
    doc: 'Partitions of `svc.key-events.v1` when a service creates it. Fixed once created.',
    default: 6,
    min: 1,
  }),
  KAFKA_KEY_EVENTS_RETENTION: env.durationMs({
    doc: '`retention.ms` of `svc.key-events.v1` when a service creates it: the audit trail of key changes (the outbox table keeps them OUTBOX_RETENTION).',
    default: '720h',
  }),

  RPC_URL: env.url({
    doc: 'JSON-RPC endpoint of the chain; unset starts a local anvil devnet whose state is kept under STATE_DIR/chain.',
    protocols: ['http', 'https'],
  }),
  CHAIN_ID: env.optionalInt({
    doc: 'EIP-155 chain id; checked against RPC_URL when both are set. Default: the chain’s own (31337 for the devnet).',
    min: 1,
  }),
  JOB_REGISTRY_ADDRESS: env.optionalString({
    doc: 'JobRegistry address on RPC_URL; unset reads the contracts from DEVNET_FILE.',
  }),
  WORKER_REGISTRY_ADDRESS: env.optionalString({
    doc: 'WorkerRegistry address on RPC_URL; unset reads the contracts from DEVNET_FILE.',
  }),
  ...devnetConfigShape,
  // Beside the rest of the state: two stacks with their own STATE_DIR do not share a description file.
  DEVNET_FILE: env.optionalString({
    doc: 'Devnet description JSON: written when a devnet starts, read by a process given RPC_URL without contract addresses. Unset: `<STATE_DIR>/devnet.json`. Relative paths are from the working directory.',
  }),
  ...tracingConfigShape,
};

export type RuntimeConfig = ConfigOf<typeof runtimeConfigShape>;
