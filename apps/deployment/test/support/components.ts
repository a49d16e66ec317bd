// What each component reads, taken from the code: the runner's shared configuration shape, the service's
// own shape, the shared dependencies its module needs and the peers whose gRPC addresses it holds.
import { gatewayConfigShape, gatewayModule } from '@svc/gateway';
import { jobOrchestratorConfigShape, jobOrchestratorModule } from '@svc/job-orchestrator';
import { keyServiceConfigShape, keyServiceModule } from '@svc/key-service';
import { paymentSettlerConfigShape, paymentSettlerModule } from '@svc/payment-settler';
import type { ConfigShape } from '@svc/platform';
import { runtimeConfigShape, type ServiceModule } from '@svc/runtime';
import { workerConfigShape, workerModule } from '@svc/worker';

export interface Component {
  /** The runner's target, also the suffix of its resources' names. */
  readonly target: string;
  /** Its block in values.yaml. */
  readonly valuesKey: string;
  readonly kind: 'Deployment' | 'StatefulSet' | 'Job';
  readonly shape: ConfigShape;
  readonly module: ServiceModule | undefined;
  /**
   * Settings the chart must set itself because their defaults do not work in a cluster, beyond those
   * derived from the code (see wiredSettings), each with the reason.
   */
  readonly alsoWired: Readonly<Record<string, string>>;
}

export const services: readonly Component[] = [
  {
    target: 'gateway',
    valuesKey: 'gateway',
    kind: 'Deployment',
    shape: gatewayConfigShape,
    module: gatewayModule as ServiceModule,
    alsoWired: {
      PUBLIC_URL: 'defaults to http://localhost:<PORT>',
      PORT: 'the Service, probes and NetworkPolicy name the port',
      HTTP_HOST: 'bound on every interface for the Service',
      CONSOLE_DIR: 'gateway.console: false turns the console off',
    },
  },
  {
    target: 'key-service',
    valuesKey: 'keyService',
    kind: 'Deployment',
    shape: keyServiceConfigShape,
    module: keyServiceModule as ServiceModule,
    alsoWired: {
      RUN_MIGRATIONS: 'false while the migration Job applies them',
      SIGNIN_TOKEN_SIGNING_KEY_ID: 'a secret of the sign-in group',
      SIGNIN_TOKEN_VERIFICATION_KEYS: 'a secret of the sign-in group (rotation)',
    },
  },
  {
    target: 'job-orchestrator',
    valuesKey: 'jobOrchestrator',
    kind: 'Deployment',
    shape: jobOrchestratorConfigShape,
    module: jobOrchestratorModule as ServiceModule,
    alsoWired: {},
  },
  {
    target: 'payment-settler',
    valuesKey: 'paymentSettler',
    kind: 'Deployment',
    shape: paymentSettlerConfigShape,
    module: paymentSettlerModule as ServiceModule,
    alsoWired: { PAY_TO_ADDRESS: 'required with FACILITATOR_PRIVATE_KEY' },
  },
  {
    target: 'worker',
    valuesKey: 'worker',
    kind: 'StatefulSet',
    shape: workerConfigShape,
    module: workerModule as ServiceModule,
    alsoWired: {
      HEALTH_PORT: 'the metrics Service, probes and NetworkPolicy name the port',
      DATA_DIR: 'the per-replica volume claim',
      BEACON_API_URL: 'chain.beaconApiUrl',
      MODEL_BACKEND: 'worker.model.backend',
      UPSTREAM_URL: 'worker.model.upstreamUrl',
      UPSTREAM_MODEL_MAP: 'worker.model.upstreamModelMap',
      DETERMINISTIC_MODELS: 'worker.model.deterministicModels',
    },
  },
];

/** The key-service's migration Job: the runner's `--target migrate`, which reads the runner's settings. */
export const migrations: Component = {
  target: 'migrate',
  valuesKey: 'keyService.migrations.job',
  kind: 'Job',
  shape: {},
  module: undefined,
  alsoWired: {},
};

/** Every setting a component reads: the runner's, then its own. */
export function readSettings(component: Component): Map<string, ConfigShape[string]> {
  return new Map([...Object.entries(runtimeConfigShape), ...Object.entries(component.shape)]);
}

/** The runner's settings of each shared dependency that a cluster cannot leave to their defaults. */
export const DEPENDENCY_SETTINGS: Readonly<Record<string, readonly string[]>> = {
  store: ['REDIS_URL', 'STORE_NAMESPACE'],
  bus: [
    'KAFKA_BROKERS',
    'KAFKA_SSL',
    'KAFKA_SASL_MECHANISM',
    'KAFKA_SASL_USERNAME',
    'KAFKA_SASL_PASSWORD',
    'KAFKA_PUBLISH_TIMEOUT',
    // Every component that may create the topics creates them alike (docs/events.md).
    'KAFKA_TOPIC_REPLICATION_FACTOR',
    'KAFKA_TOPIC_MIN_INSYNC_REPLICAS',
    'KAFKA_JOB_LIFECYCLE_PARTITIONS',
    'KAFKA_JOB_LIFECYCLE_RETENTION',
    'KAFKA_KEY_EVENTS_PARTITIONS',
    'KAFKA_KEY_EVENTS_RETENTION',
  ],
  database: ['DATABASE_URL'],
  chain: ['RPC_URL', 'CHAIN_ID', 'JOB_REGISTRY_ADDRESS', 'WORKER_REGISTRY_ADDRESS'],
  grpc: ['GRPC_HOST', 'GRPC_PORT'],
  // The metrics Service and the ServiceMonitor name the port.
  metrics: ['METRICS_HOST', 'METRICS_PORT'],
};

/**
 * The settings the chart must wire for a component (given values that configure everything), each with
 * why: what its module needs from the runner, the addresses of its peers, what the service requires,
 * what binds loopback by default, the local state directory, every secret of its own, and the rest
 * listed per component.
 */
export function wiredSettings(component: Component): Map<string, string> {
  const wired = new Map<string, string>([
    ['LOG_LEVEL', 'global.logLevel'],
    ['STATE_DIR', "the image's default is inside the read-only root filesystem"],
  ]);
  if (component.kind !== 'Job') wired.set('SHUTDOWN_TIMEOUT', "below the pod's termination grace period");
  const read = readSettings(component);
  for (const need of component.module?.needs ?? []) {
    for (const setting of DEPENDENCY_SETTINGS[need] ?? []) wired.set(setting, `the module needs ${need}`);
    if (need === 'database') wired.set('DATABASE_URL', 'the module needs database');
  }
  if (component.target === 'migrate') wired.set('DATABASE_URL', 'the migrations run on it');
  for (const setting of Object.keys(component.module?.peers ?? {}))
    wired.set(setting, 'the gRPC address of a peer');
  for (const [setting, field] of Object.entries(component.shape)) {
    if (field.required) wired.set(setting, 'required by the service');
    if (field.defaultText === '127.0.0.1') wired.set(setting, 'binds loopback by default');
    if (field.secret) wired.set(setting, 'a secret of the service');
  }
  for (const [setting, reason] of Object.entries(component.alsoWired)) wired.set(setting, reason);
  for (const setting of wired.keys())
    if (!read.has(setting))
      throw new Error(`${component.target} is said to need ${setting}, which it does not read`);
  return wired;
}

/** Secret settings: never given as plain values, only from Secrets. */
export function isSecret(component: Component, setting: string): boolean {
  return readSettings(component).get(setting)?.secret === true;
}
