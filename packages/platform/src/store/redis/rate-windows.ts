import { randomUUID } from 'node:crypto';
import type { RateWindows, RateWindowVerdict } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import { integerAt, LUA_NOW_MS, type LuaScript, type RedisCommandRunner } from './redis-client.js';

// An exact sliding log: one sorted-set member per counted hit, scored by its server time. A refused hit
// is not added, so hammering a closed window does not push its opening further out.
const HIT: LuaScript = {
  name: 'svcStoreRateWindowHit',
  keys: 1,
  lua: `${LUA_NOW_MS}
local now = now_ms()
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local counted = redis.call('ZCARD', KEYS[1])
if counted < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, limit - counted - 1, 0, now + window}
end
local blocking = redis.call('ZRANGE', KEYS[1], counted - limit, counted - limit, 'WITHSCORES')
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
return {0, 0, tonumber(blocking[2]) + window - now, tonumber(newest[2]) + window}
`,
};

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
      HIT,
      [this.keys.rateWindow(key)],
      [limit, windowMs, randomUUID()],
    );
    return {
      allowed: integerAt(reply, 0) === 1,
      limit,
      remaining: integerAt(reply, 1),
      retryAfterMs: integerAt(reply, 2),
      resetAtMs: integerAt(reply, 3),
    };
  }
}
