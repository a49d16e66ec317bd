import {
  type EventBus,
  jobLifecycleTopic,
  keyEventsTopic,
  type Logger,
  RetriedSubscription,
  type Store,
} from '@svc/platform';
import type { ServiceImpl } from '@svc/proto';
import type { JobLifecycleEventSchema } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import type { Registry } from 'prom-client';
import type { KeyServiceConfig } from './config.js';
import type { PrismaClient } from './db/database.js';
import { OutboxRelay } from './events/outbox-relay.js';
import {
  keyServiceHandlers,
  type KeyServiceDomain,
  type KeyServiceMethods,
} from './grpc/key-service-handlers.js';
import { ApiKeyHasher } from './keys/api-key-secret.js';
import { ApiKeys } from './keys/api-keys.js';
import { KeyResolver } from './keys/key-resolver.js';
import { LimitHits } from './keys/limit-hits.js';
import { KeyServiceMetrics } from './observability/key-service-metrics.js';
import { SignIn } from './signin/sign-in.js';
import { SignInChallenges, type SiweSettings } from './signin/sign-in-challenges.js';
import { SignInTokens } from './signin/sign-in-tokens.js';
import { SignedMessageVerifier } from './signin/signed-message-verifier.js';
import type { TokenKeyRing } from './signin/token-key-ring.js';
import { lifecycleSettlementHandler } from './spend/lifecycle-settlement.js';
import { createReservationSweeper } from './spend/reservation-sweeper.js';
import { SpendLedger } from './spend/spend-ledger.js';
import { UsageLog, usageRecordingHandler } from './usage/usage-log.js';

/** What the key-service runs on; main.ts passes the real ones, tests whatever they need. */
export interface KeyServicePorts {
  readonly config: KeyServiceConfig;
  readonly db: PrismaClient;
  readonly store: Store;
  readonly bus: EventBus;
  readonly tokenKeys: TokenKeyRing;
  readonly logger: Logger;
  /** The clock of sign-in checks and tokens (reservation expiries use the database's). */
  readonly now?: () => Date;
  /** Where its metrics are registered (the process's registry); default a registry of their own. */
  readonly metrics?: Registry;
}

export interface KeyServiceInstance {
  readonly handlers: ServiceImpl<KeyServiceMethods>;
  readonly domain: KeyServiceDomain;
  readonly relay: OutboxRelay;
  readonly metrics: KeyServiceMetrics;
  /** Subscribes to job lifecycle events and starts the outbox relay and the reservation sweeper. */
  start(): Promise<void>;
  /** Stops the background work (waiting for passes in progress); leaves the ports open. */
  stop(): Promise<void>;
}

/** Builds the key-service from its ports: no globals, nothing started until `start`. */
export function buildKeyService(ports: KeyServicePorts): KeyServiceInstance {
  const { config, db, store, bus, tokenKeys, logger } = ports;
  const now = ports.now ?? (() => new Date());

  const siwe: SiweSettings = {
    domain: config.SIWE_DOMAIN,
    uri: config.SIWE_URI as string,
    chainId: config.CHAIN_ID,
    statement: config.SIWE_STATEMENT,
    challengeTtlMs: config.SIWE_CHALLENGE_TTL,
    clockSkewMs: config.SIWE_CLOCK_SKEW,
  };
  const challenges = new SignInChallenges(store.values, siwe, now);
  const tokens = new SignInTokens(
    tokenKeys,
    {
      issuer: config.SIGNIN_TOKEN_ISSUER,
      audience: config.SIGNIN_TOKEN_AUDIENCE,
      ttlMs: config.SIGNIN_TOKEN_TTL,
    },
    now,
  );
  const relay = new OutboxRelay(
    db,
    bus,
    { pollIntervalMs: config.OUTBOX_POLL_INTERVAL, batchSize: config.OUTBOX_BATCH_SIZE },
    logger,
  );
  const metrics = new KeyServiceMetrics(ports.metrics, () => relay.backlog());
  const signIn = new SignIn(challenges, new SignedMessageVerifier(challenges, siwe, now), tokens, metrics);

  const hasher = new ApiKeyHasher(config.API_KEY_PEPPER);
  const limitHits = new LimitHits(db, store.tallies);
  const apiKeys = new ApiKeys(
    db,
    hasher,
    store.revocations,
    { maxActiveKeysPerWallet: config.MAX_ACTIVE_KEYS_PER_WALLET },
    limitHits,
    (kind) => {
      relay.wake();
      metrics.keyChanged(kind);
    },
  );
  const resolver = new KeyResolver(db, hasher, store.revocations, logger);
  const ledger = new SpendLedger(
    db,
    { defaultTtlMs: config.RESERVATION_DEFAULT_TTL, maxTtlMs: config.RESERVATION_MAX_TTL },
    metrics,
  );
  const sweeper = createReservationSweeper(
    ledger,
    limitHits,
    relay,
    {
      intervalMs: config.RESERVATION_SWEEP_INTERVAL,
      limitHitReportRetentionMs: config.LIMIT_HIT_REPORT_RETENTION,
      publishedEventRetentionMs: config.OUTBOX_RETENTION,
    },
    logger,
  );

  const usage = new UsageLog(db);
  const domain: KeyServiceDomain = { signIn, tokenKeys, apiKeys, resolver, ledger, limitHits, usage };
  const settle = lifecycleSettlementHandler(ledger, logger);
  const recordUsage = usageRecordingHandler(usage, logger);
  let lifecycleSubscription: RetriedSubscription<typeof JobLifecycleEventSchema> | undefined;

  return {
    handlers: keyServiceHandlers(domain),
    domain,
    relay,
    metrics,
    async start() {
      lifecycleSubscription = new RetriedSubscription(
        bus,
        jobLifecycleTopic,
        {
          group: config.LIFECYCLE_CONSUMER_GROUP,
          // Both are idempotent, so an event retried after either failed is handled again whole.
          handler: async (event) => {
            await settle(event);
            await recordUsage(event);
          },
        },
        {
          logger,
          ensureTopics: [keyEventsTopic, jobLifecycleTopic],
          meanwhile: 'the holds of calls whose gateway died lapse instead of settling from their events',
        },
      );
      // With the brokers up the consumer is live before the service serves; without them it serves
      // anyway (a pod restarted during an outage must start) and keeps trying in the background.
      await lifecycleSubscription.firstAttempt;
      relay.start();
      sweeper.start();
      // Events committed while no replica ran go out now, not at the first poll.
      relay.wake();
    },
    async stop() {
      await lifecycleSubscription?.close();
      await Promise.all([relay.stop(), sweeper.stop()]);
    },
  };
}
