/**
 * Backoff between attempts of a failing handler. Attempts never stop: giving up would lose the event
 * or reorder its key, so a poison event holds its key (and partition) until it is fixed, while the
 * logs say so at every attempt.
 */
export interface RetryPolicy {
  readonly initialDelayMs: number;
  /** Upper bound of one wait, so a consumer that recovers is back within this delay. */
  readonly maxDelayMs: number;
  readonly multiplier: number;
  /** Fraction (0..1) of each wait taken off at random, so consumers that failed together spread out. */
  readonly jitter: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = Object.freeze({
  initialDelayMs: 200,
  maxDelayMs: 30_000,
  multiplier: 2,
  jitter: 0.2,
});

export function resolveRetryPolicy(overrides: Partial<RetryPolicy> = {}): RetryPolicy {
  const policy = { ...DEFAULT_RETRY_POLICY, ...overrides };
  const { initialDelayMs, maxDelayMs, multiplier, jitter } = policy;
  if (
    !(initialDelayMs >= 0) ||
    !(maxDelayMs >= initialDelayMs) ||
    !(multiplier >= 1) ||
    !(jitter >= 0 && jitter <= 1)
  ) {
    throw new RangeError(`invalid retry policy ${JSON.stringify(policy)}`);
  }
  return Object.freeze(policy);
}

/** How long to wait after the given failed attempt (1-based). */
export function retryDelayMs(
  policy: RetryPolicy,
  failedAttempt: number,
  random: () => number = Math.random,
): number {
  const exponential = policy.initialDelayMs * policy.multiplier ** Math.max(0, failedAttempt - 1);
  const capped = Math.min(policy.maxDelayMs, exponential);
  return Math.round(capped * (1 - policy.jitter * random()));
}
