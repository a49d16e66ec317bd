import { PublishTimeoutError } from './errors.js';

/** The publish timeout when a bus is given none: long enough for a leader election, short enough not to hang a caller. */
export const DEFAULT_PUBLISH_TIMEOUT_MS = 5_000;

export function resolvePublishTimeoutMs(timeoutMs: number | undefined): number {
  const resolved = timeoutMs ?? DEFAULT_PUBLISH_TIMEOUT_MS;
  if (!Number.isInteger(resolved) || resolved < 1)
    throw new RangeError(`publishTimeoutMs must be a positive integer, got ${resolved}`);
  return resolved;
}

/**
 * Settles like `work`, or rejects with PublishTimeoutError once `timeoutMs` has passed, calling
 * `onTimeout` first (so work that has not begun yet can be dropped). Work that has begun cannot be called
 * back (a kafkajs send goes on retrying): its late outcome is dropped, not left unhandled.
 */
export function withPublishTimeout<T>(
  work: Promise<T>,
  context: {
    readonly topic: string;
    readonly events: number;
    readonly timeoutMs: number;
    readonly onTimeout?: () => void;
  },
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      context.onTimeout?.();
      reject(new PublishTimeoutError(context.topic, context.timeoutMs, context.events));
    }, context.timeoutMs);
  });
  work.catch(() => undefined);
  return Promise.race([work, timedOut]).finally(() => clearTimeout(timer));
}
