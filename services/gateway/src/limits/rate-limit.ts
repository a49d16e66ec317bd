import { AppError, type RateWindows, type RateWindowVerdict } from '@svc/platform';
import type { Request, RequestHandler, Response } from 'express';

export interface RateLimitRule {
  /** Names the limit in store keys, so two rules never share a window. */
  readonly name: string;
  readonly limit: number;
  readonly windowMs: number;
  /** Who is counted: a wallet, a client address. */
  subject(req: Request, res: Response): string;
  /** What the 429 says, e.g. "Too many key management calls for this wallet". */
  readonly refusal: string;
  /** Told of each refusal (e.g. to count it in an API key's `limitHits`); must not throw. */
  onRefused?(req: Request, res: Response): void;
}

/** The store key of a rule's window for one subject. */
export function rateWindowKey(name: string, subject: string): string {
  return `gateway:${name}:${subject}`;
}

/**
 * Puts a window's verdict on the response (`x-ratelimit-limit`, `x-ratelimit-remaining`) and returns the
 * 429 `rate_limit_exceeded` (with `retry-after`) to answer when it refused, else undefined.
 */
export function rateLimitRefusal(
  res: Response,
  verdict: RateWindowVerdict,
  rule: Pick<RateLimitRule, 'limit' | 'windowMs' | 'refusal'>,
): AppError | undefined {
  res.setHeader('x-ratelimit-limit', String(verdict.limit));
  res.setHeader('x-ratelimit-remaining', String(verdict.remaining));
  if (verdict.allowed) return undefined;
  return new AppError('rate_limit_exceeded', {
    message: `${rule.refusal}: at most ${rule.limit} calls per ${Math.round(rule.windowMs / 1000)} s.`,
    retryAfterSeconds: verdict.retryAfterMs / 1000,
  });
}

/**
 * Counts the request against a sliding window in the shared store (one atomic operation, so the limit holds
 * over every replica) and refuses with 429 `rate_limit_exceeded` and `retry-after` once it is used up.
 */
export function rateLimited(windows: RateWindows, rule: RateLimitRule): RequestHandler {
  return async (req, res, next) => {
    const verdict = await windows.hit(
      rateWindowKey(rule.name, rule.subject(req, res)),
      rule.limit,
      rule.windowMs,
    );
    const refusal = rateLimitRefusal(res, verdict, rule);
    if (refusal !== undefined) {
      rule.onRefused?.(req, res);
      throw refusal;
    }
    next();
  };
}
