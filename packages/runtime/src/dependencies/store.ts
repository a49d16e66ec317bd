import { MemoryStore, RedisStore, type Logger, type Store } from '@svc/platform';

export interface StoreSettings {
  readonly REDIS_URL: string | undefined;
  readonly STORE_NAMESPACE: string;
}

/** Redis when REDIS_URL is set (shared by every replica), else the in-memory store of this process. */
export function openStore(settings: StoreSettings, logger: Logger): Store {
  if (!settings.REDIS_URL) {
    logger.info('REDIS_URL is unset: limits, nonces and presence live in this process (in-memory store)');
    return new MemoryStore();
  }
  return new RedisStore({
    redis: settings.REDIS_URL,
    namespace: settings.STORE_NAMESPACE,
    onConnectionError: (error) => logger.warn({ err: error }, 'redis connection error'),
  });
}
