export interface BackoffPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
}

/**
 * Exponential backoff with full jitter: the wait before redial number `attempt` (0-based) is random
 * in [0, min(max, initial·2^attempt)], so workers cut off together do not redial together.
 */
export function backoffDelayMs(
  policy: BackoffPolicy,
  attempt: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(policy.maxMs, policy.initialMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling * random());
}
