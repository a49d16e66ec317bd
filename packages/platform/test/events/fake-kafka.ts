import type {
  Admin,
  Consumer,
  ConsumerConfig,
  ConsumerRunConfig,
  ConsumerSubscribeTopics,
  EachMessagePayload,
  ITopicConfig,
  KafkaMessage,
  Message,
  Producer,
  ProducerConfig,
  ProducerRecord,
  SeekEntry,
} from 'kafkajs';
import type { EventBusLogger, KafkaClient } from '../../src/events/index.js';

// Just enough of kafkajs's client to drive KafkaEventBus without a broker: it records what the bus
// asks for and lets a test play the broker's part (deliver records, join the group, crash).

/** The record a consumer is handed for a message a producer sent, at `offset`. */
export function consumedRecord(
  sent: Message,
  offset: number,
  overrides: Partial<KafkaMessage> = {},
): KafkaMessage {
  return {
    key: Buffer.from(sent.key as string),
    value: sent.value as Buffer,
    timestamp: String(Date.now()),
    attributes: 0,
    offset: String(offset),
    headers: Object.fromEntries(
      Object.entries(sent.headers ?? {}).map(([k, v]) => [k, Buffer.from(v as string)]),
    ),
    ...overrides,
  } as KafkaMessage;
}

type Listener = (event: { payload: Record<string, unknown> }) => void;

export class FakeProducer {
  connects = 0;
  disconnects = 0;
  failNextConnect = false;
  /** Sends that never hear back, as from a broker that stopped answering. */
  hangSends = false;
  readonly sent: ProducerRecord[] = [];
  constructor(readonly config: ProducerConfig | undefined) {}

  async connect(): Promise<void> {
    this.connects += 1;
    if (this.failNextConnect) {
      this.failNextConnect = false;
      throw new Error('connection refused');
    }
  }

  /**
   * While set, sends wait (as kafkajs retrying a broker that does not answer) until `releaseHeldSends`
   * lands them, in the order they were sent, or fails them.
   */
  holdSends = false;
  readonly #held: Array<{ record: ProducerRecord; settle: (landed: boolean) => void }> = [];

  async send(record: ProducerRecord): Promise<[]> {
    if (this.hangSends) return new Promise<[]>(() => undefined);
    if (this.holdSends) {
      return new Promise<[]>((resolve, reject) =>
        this.#held.push({
          record,
          settle: (landed) => {
            if (!landed) return reject(new Error('KafkaJSNumberOfRetriesExceeded'));
            this.sent.push(record);
            resolve([]);
          },
        }),
      );
    }
    this.sent.push(record);
    return [];
  }

  get heldSends(): number {
    return this.#held.length;
  }

  /** Ends the hold: every held send lands (or fails), oldest first. */
  releaseHeldSends(landed = true): void {
    this.holdSends = false;
    for (const { settle } of this.#held.splice(0)) settle(landed);
  }

  async disconnect(): Promise<void> {
    this.disconnects += 1;
  }
}

export class FakeConsumer {
  readonly events = {
    GROUP_JOIN: 'consumer.group_join',
    CRASH: 'consumer.crash',
    REBALANCING: 'consumer.rebalancing',
  };
  readonly listeners = new Map<string, Set<Listener>>();
  subscription: ConsumerSubscribeTopics | undefined;
  runConfig: ConsumerRunConfig | undefined;
  disconnected = false;
  /** What the broker does once the consumer runs: join the group (default) or crash. */
  onRun: (consumer: FakeConsumer) => void = (consumer) => consumer.emit('consumer.group_join', {});
  readonly #inFlight = new Set<Promise<void>>();

  constructor(readonly config: ConsumerConfig) {}

  on(event: string, listener: Listener): () => void {
    const listeners = this.listeners.get(event) ?? new Set<Listener>();
    listeners.add(listener);
    this.listeners.set(event, listeners);
    return () => listeners.delete(listener);
  }

  emit(event: string, payload: Record<string, unknown>): void {
    for (const listener of this.listeners.get(event) ?? []) listener({ payload });
  }

  connects = 0;

  async connect(): Promise<void> {
    this.connects += 1;
  }

  async subscribe(subscription: ConsumerSubscribeTopics): Promise<void> {
    this.subscription = subscription;
  }

  async run(config: ConsumerRunConfig): Promise<void> {
    this.runConfig = config;
    setImmediate(() => this.onRun(this));
  }

  /** Hands one record to the bus's eachMessage, as kafkajs would; the promise is kafkajs's view of it. */
  deliver(message: KafkaMessage, heartbeat: () => Promise<void> = async () => undefined): Promise<void> {
    const eachMessage = this.runConfig?.eachMessage;
    if (!eachMessage) throw new Error('consumer is not running');
    const payload: EachMessagePayload = {
      topic: this.subscription?.topics[0] as string,
      partition: 0,
      message,
      heartbeat,
      pause: () => () => undefined,
    };
    const handling = eachMessage(payload);
    const tracked = handling.catch(() => undefined);
    this.#inFlight.add(tracked);
    void tracked.finally(() => this.#inFlight.delete(tracked));
    return handling;
  }

  // Like kafkajs: stopping waits for the eachMessage in flight.
  async disconnect(): Promise<void> {
    this.disconnected = true;
    await Promise.all([...this.#inFlight]);
  }
}

export class FakeAdmin {
  readonly topics = new Set<string>();
  readonly created: ITopicConfig[] = [];
  /** Committed offsets per group, per partition ('-1': none). */
  readonly committed = new Map<string, string[]>();
  /** High watermark per partition of every topic. */
  highWatermarks = ['5', '9'];
  readonly setOffsetsCalls: Array<{ groupId: string; topic: string; partitions: SeekEntry[] }> = [];
  /** The layout and configs of existing topics, as fetchTopicMetadata and describeConfigs report them. */
  readonly layouts = new Map<
    string,
    { partitions: number; replicationFactor: number; configs: Record<string, string> }
  >();
  describeConfigsFails = false;
  /** Errors the next calls throw, one per call, as a broker answers while it settles. */
  readonly failures: Record<'fetchOffsets' | 'fetchTopicOffsets' | 'setOffsets', Error[]> = {
    fetchOffsets: [],
    fetchTopicOffsets: [],
    setOffsets: [],
  };
  fetchOffsetsCalls = 0;
  fetchTopicMetadataCalls = 0;
  disconnects = 0;

  async connect(): Promise<void> {}

  async disconnect(): Promise<void> {
    this.disconnects += 1;
  }

  async listTopics(): Promise<string[]> {
    return [...this.topics];
  }

  async createTopics({ topics }: { topics: ITopicConfig[] }): Promise<boolean> {
    for (const topic of topics) {
      this.created.push(topic);
      this.topics.add(topic.topic);
    }
    return true;
  }

  async fetchOffsets({ groupId, topics }: { groupId: string; topics: string[] }) {
    this.fetchOffsetsCalls += 1;
    const failure = this.failures.fetchOffsets.shift();
    if (failure) throw failure;
    const offsets = this.committed.get(groupId) ?? this.highWatermarks.map(() => '-1');
    return topics.map((topic) => ({
      topic,
      partitions: offsets.map((offset, partition) => ({ partition, offset, metadata: null })),
    }));
  }

  async fetchTopicOffsets(_topic: string) {
    const failure = this.failures.fetchTopicOffsets.shift();
    if (failure) throw failure;
    return this.highWatermarks.map((offset, partition) => ({ partition, offset, high: offset, low: '0' }));
  }

  async fetchTopicMetadata({ topics }: { topics: string[] }) {
    this.fetchTopicMetadataCalls += 1;
    return {
      topics: topics.map((name) => {
        const layout = this.layouts.get(name) ?? { partitions: 1, replicationFactor: 1, configs: {} };
        return {
          name,
          partitions: Array.from({ length: layout.partitions }, (_, partitionId) => ({
            partitionId,
            leader: 0,
            replicas: Array.from({ length: layout.replicationFactor }, (_, replica) => replica),
            isr: [],
            partitionErrorCode: 0,
          })),
        };
      }),
    };
  }

  async describeConfigs({ resources }: { resources: Array<{ name: string; configNames?: string[] }> }) {
    if (this.describeConfigsFails) throw new Error('TOPIC_AUTHORIZATION_FAILED');
    return {
      throttleTime: 0,
      resources: resources.map(({ name, configNames }) => ({
        resourceName: name,
        resourceType: 2,
        errorCode: 0,
        errorMessage: null,
        configEntries: Object.entries(this.layouts.get(name)?.configs ?? {})
          .filter(([configName]) => !configNames || configNames.includes(configName))
          .map(([configName, configValue]) => ({
            configName,
            configValue,
            isDefault: false,
            configSource: 1,
            isSensitive: false,
            readOnly: false,
            configSynonyms: [],
          })),
      })),
    };
  }

  async setOffsets(call: { groupId: string; topic: string; partitions: SeekEntry[] }): Promise<void> {
    const failure = this.failures.setOffsets.shift();
    if (failure) throw failure;
    this.setOffsetsCalls.push(call);
  }
}

export class FakeKafka implements KafkaClient {
  readonly producers: FakeProducer[] = [];
  readonly consumers: FakeConsumer[] = [];
  readonly adminClient = new FakeAdmin();
  /** Applied to each consumer as it is created. */
  configureConsumer: (consumer: FakeConsumer) => void = () => undefined;

  producer(config?: ProducerConfig): Producer {
    const producer = new FakeProducer(config);
    this.producers.push(producer);
    return producer as unknown as Producer;
  }

  consumer(config: ConsumerConfig): Consumer {
    const consumer = new FakeConsumer(config);
    this.configureConsumer(consumer);
    this.consumers.push(consumer);
    return consumer as unknown as Consumer;
  }

  admin(): Admin {
    return this.adminClient as unknown as Admin;
  }
}

export interface LogLine {
  level: 'debug' | 'info' | 'warn' | 'error';
  fields: Record<string, unknown>;
  message: string;
}

export function capturingLogger(): { lines: LogLine[]; logger: EventBusLogger } {
  const lines: LogLine[] = [];
  const at =
    (level: LogLine['level']) =>
    (fields: Record<string, unknown>, message: string): void => {
      lines.push({ level, fields, message });
    };
  const logger = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  return { lines, logger: logger as unknown as EventBusLogger };
}
