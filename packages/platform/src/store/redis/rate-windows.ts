import { randomUUID } from 'node:crypto';
import type { RateWindows, RateWindowVerdict } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import { integerAt, LUA_NOW_MS, type LuaScript, type RedisCommandRunner } from './redis-client.js';

/**
 * One hit on a sliding window, as a Lua function for the scripts that count one (needs LUA_NOW_MS before
 * it). An exact sliding log: one sorted-set member per counted hit, scored by its server time. A refused hit
 * is not added, so hammering a closed window does not push its opening further out. Returns
 * {allowed (1/0), remaining, retry after ms, reset at ms}.
 */
export const LUA_RATE_WINDOW_HIT = `
local function rate_window_hit(key, limit, window, member)
  local now = now_ms()
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local counted = redis.call('ZCARD', key)
  if counted < limit then
    redis.call('ZADD', key, now, member)
    redis.call('PEXPIRE', key, window)
    return {1, limit - counted - 1, 0, now + window}
  end
  local blocking = redis.call('ZRANGE', key, counted - limit, counted - limit, 'WITHSCORES')
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  return {0, 0, tonumber(blocking[2]) + window - now, tonumber(newest[2]) + window}
end
`;

/** One hit on one window (`rateWindows.hit`, and the second step of a cluster's `hitByMarker`). */
export const RATE_WINDOW_HIT: LuaScript = {
  name: 'svcStoreRateWindowHit',
  keys: 1,
  lua: `${LUA_NOW_MS}${LUA_RATE_WINDOW_HIT}
return rate_window_hit(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3])
`,
};

/** The verdict in a script's reply from `offset` on (what `rate_window_hit` returned). */
export function rateWindowVerdictAt(reply: unknown, offset: number, limit: number): RateWindowVerdict {
  return {
    allowed: integerAt(reply, offset) === 1,
    limit,
    remaining: integerAt(reply, offset + 1),
    retryAfterMs: integerAt(reply, offset + 2),
    resetAtMs: integerAt(reply, offset + 3),
  };
}

export class RedisRateWindows implements RateWindows {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
  ) {}

  async hit(key: string, limit: number, windowMs: number): Promise<RateWindowVerdict> {
    requireKey('key', key);
    requirePositiveInteger('limit', limit);
    requirePositiveInteger('windowMs', windowMs);
    const reply = await this.redis.script(
      'rateWindows.hit',
      RATE_WINDOW_HIT,
      [this.keys.rateWindow(key)],
      [limit, windowMs, randomUUID()],
    );
    return rateWindowVerdictAt(reply, 0, limit);
  }
}
