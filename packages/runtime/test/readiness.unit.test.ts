import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StructSchema } from '@bufbuild/protobuf/wkt';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ConfigError,
  createLogger,
  defineTopic,
  EmbeddedEventBus,
  env,
  jobLifecycleTopic,
  keyEventsTopic,
  loadConfig,
  type EventSubscription,
} from '@svc/platform';
import { waitFor } from '@svc/testkit';
import { kafkaEventBusOptions } from '../src/dependencies/event-bus.js';
import { defineModule, runtimeConfigShape, runTarget, type ProcessReadiness } from '../src/index.js';

// A subscription whose consumer died makes the process unready in one place: the runner's readiness,
// which grpc.health.v1 follows and the gateway's /readyz asks, until the consumer recovers. One that is
// reconnecting through a broker outage does not.

const logger = createLogger({ service: 'readiness-test', level: 'silent' });
const topic = defineTopic({
  name: 'test.readiness',
  schema: StructSchema,
  key: () => 'k',
  eventId: () => 'e',
});

describe('process readiness', () => {
  let stateDir: string;

  beforeAll(() => {
    stateDir = mkdtempSync(join(tmpdir(), 'svc-readiness-'));
  });

  afterAll(() => {
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('turns gRPC health NOT_SERVING while a subscription is dead, SERVING once it recovers, and not for a broker outage', async () => {
    const bus = new EmbeddedEventBus();
    let subscription: EventSubscription | undefined;
    let given: ProcessReadiness | undefined;
    const consumer = defineModule({
      name: 'consumer',
      configShape: { GROUP: env.string({ doc: 'group', default: 'consumer.settlement' }) },
      needs: ['bus', 'grpc'],
      build(config, { bus: shared, readiness }) {
        given = readiness;
        return {
          async start() {
            subscription = await shared.subscribe(topic, {
              group: config.GROUP,
              handler: async () => undefined,
            });
          },
          async stop() {
            await subscription?.close();
          },
        };
      },
    });
    const running = await runTarget(
      { name: 'consumer', modules: [consumer] },
      {
        env: { STATE_DIR: stateDir, GRPC_PORT: '0' },
        logger,
        provided: { bus },
        readinessIntervalMs: 10,
      },
    );
    const grpc = running.dependencies.grpc!;
    const statuses: string[] = [];
    // What a grpc.health.v1 watcher of the server (service '') would see from here on.
    const original = grpc.health.setStatus.bind(grpc.health);
    grpc.health.setStatus = (service, status) => {
      if (service === '') statuses.push(status);
      original(service, status);
    };
    try {
      expect(given).toBe(running.readiness);
      expect(running.readiness.notReadyBecause()).toBeUndefined();

      await bus.simulateConsumerCrash(subscription!, 'SASL authentication failed');
      await waitFor(() => statuses.at(-1) === 'NOT_SERVING' || undefined, { what: 'NOT_SERVING' });
      expect(running.readiness.notReadyBecause()).toMatch(
        /^event consumer consumer\.settlement of test\.readiness is dead since \S+: SASL authentication failed$/,
      );

      bus.simulateConsumerRecovery(subscription!);
      await waitFor(() => statuses.at(-1) === 'SERVING' || undefined, { what: 'SERVING again' });
      expect(running.readiness.notReadyBecause()).toBeUndefined();
      expect(statuses).toEqual(['NOT_SERVING', 'SERVING']);

      // A broker outage: the consumer is reconnecting, as on every replica; the process stays ready.
      bus.simulateBrokerOutage(true);
      expect(bus.health()).toMatchObject([{ state: 'reconnecting' }]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(running.readiness.notReadyBecause()).toBeUndefined();
      bus.simulateBrokerOutage(false);
      expect(statuses).toEqual(['NOT_SERVING', 'SERVING']);
    } finally {
      await running.stop();
      await bus.close();
    }
  });

  it('is ready with no bus at all', async () => {
    const plain = defineModule({
      name: 'plain',
      configShape: {},
      needs: [],
      build: (_config, { readiness }) => ({
        async start() {
          expect(readiness.notReadyBecause()).toBeUndefined();
        },
        async stop() {},
      }),
    });
    const running = await runTarget(
      { name: 'plain', modules: [plain] },
      { env: { STATE_DIR: stateDir }, logger },
    );
    expect(running.readiness.notReadyBecause()).toBeUndefined();
    await running.stop();
  });
});

describe('Kafka settings', () => {
  const settings = (overrides: Record<string, string> = {}) => ({
    ...loadConfig(runtimeConfigShape, { KAFKA_BROKERS: 'kafka-0:9092,kafka-1:9092', ...overrides }),
    KAFKA_CLIENT_ID: 'svc-key-service',
  });

  it("creates the product's topics with the documented defaults", () => {
    const options = kafkaEventBusOptions(settings(), logger);

    expect(options).toMatchObject({
      brokers: ['kafka-0:9092', 'kafka-1:9092'],
      clientId: 'svc-key-service',
      ssl: false,
      publishTimeoutMs: 5_000,
      joinTimeoutMs: 60_000,
      topics: {
        [jobLifecycleTopic.name]: {
          partitions: 12,
          replicationFactor: 3,
          retentionMs: 168 * 3_600_000,
          minInSyncReplicas: 2,
        },
        [keyEventsTopic.name]: {
          partitions: 6,
          replicationFactor: 3,
          retentionMs: 720 * 3_600_000,
          minInSyncReplicas: 2,
        },
      },
    });
    expect(options.sasl).toBeUndefined();
  });

  it('follows the settings: a single-broker cluster, other partitions and retention, SASL over TLS', () => {
    const options = kafkaEventBusOptions(
      settings({
        KAFKA_TOPIC_REPLICATION_FACTOR: '1',
        KAFKA_JOB_LIFECYCLE_PARTITIONS: '3',
        KAFKA_JOB_LIFECYCLE_RETENTION: '24h',
        KAFKA_KEY_EVENTS_RETENTION: '1h',
        KAFKA_PUBLISH_TIMEOUT: '2s',
        KAFKA_JOIN_TIMEOUT: '90s',
        KAFKA_SSL: 'true',
        KAFKA_SASL_MECHANISM: 'scram-sha-512',
        KAFKA_SASL_USERNAME: 'svc',
        KAFKA_SASL_PASSWORD: 'secret',
      }),
      logger,
    );

    expect(options.topics?.[jobLifecycleTopic.name]).toEqual({
      partitions: 3,
      replicationFactor: 1,
      retentionMs: 86_400_000,
      minInSyncReplicas: 1,
    });
    expect(options.topics?.[keyEventsTopic.name]?.retentionMs).toBe(3_600_000);
    expect(options).toMatchObject({
      ssl: true,
      publishTimeoutMs: 2_000,
      joinTimeoutMs: 90_000,
      sasl: { mechanism: 'scram-sha-512', username: 'svc', password: 'secret' },
    });
  });

  it('refuses settings Kafka would refuse, naming each', () => {
    let error: unknown;
    try {
      kafkaEventBusOptions(
        settings({
          KAFKA_BROKERS: 'kafka-0',
          KAFKA_TOPIC_REPLICATION_FACTOR: '2',
          KAFKA_TOPIC_MIN_INSYNC_REPLICAS: '3',
          KAFKA_SASL_MECHANISM: 'plain',
        }),
        logger,
      );
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      'KAFKA_TOPIC_MIN_INSYNC_REPLICAS (3) must be at most KAFKA_TOPIC_REPLICATION_FACTOR (2)',
      'KAFKA_SASL_MECHANISM plain needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD',
      'KAFKA_BROKERS: invalid Kafka broker "kafka-0": expected host:port',
    ]);
  });
});
