import { randomUUID } from 'node:crypto';
import type { ConcurrencyLeases, LeaseOutcome } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import { integerAt, LUA_NOW_MS, type LuaScript, type RedisCommandRunner } from './redis-client.js';

// Leases live in a sorted set scored by their expiry; a lease whose holder vanished simply falls out of
// the live range at its TTL. The key itself expires with its last lease.
const PURGE_AND_EXPIRE_WITH_LAST = `
local function purge(now)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
end
local function expire_with_last_lease()
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if last[2] then redis.call('PEXPIREAT', KEYS[1], last[2]) end
end
`;

const ACQUIRE: LuaScript = {
  name: 'svcStoreLeaseAcquire',
  keys: 1,
  lua: `${LUA_NOW_MS}${PURGE_AND_EXPIRE_WITH_LAST}
local now = now_ms()
local limit = tonumber(ARGV[1])
purge(now)
local active = redis.call('ZCARD', KEYS[1])
if active < limit then
  local expires = now + tonumber(ARGV[2])
  redis.call('ZADD', KEYS[1], expires, ARGV[3])
  expire_with_last_lease()
  return {1, active + 1, expires}
end
local blocking = redis.call('ZRANGE', KEYS[1], active - limit, active - limit, 'WITHSCORES')
return {0, active, tonumber(blocking[2]) - now}
`,
};

const RENEW: LuaScript = {
  name: 'svcStoreLeaseRenew',
  keys: 1,
  lua: `${LUA_NOW_MS}${PURGE_AND_EXPIRE_WITH_LAST}
local now = now_ms()
purge(now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
expire_with_last_lease()
return 1
`,
};

const RELEASE: LuaScript = {
  name: 'svcStoreLeaseRelease',
  keys: 1,
  lua: `${LUA_NOW_MS}
local expires = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expires then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
if tonumber(expires) > now_ms() then return 1 end
return 0
`,
};

const COUNT: LuaScript = {
  name: 'svcStoreLeaseCount',
  keys: 1,
  lua: `${LUA_NOW_MS}
return redis.call('ZCOUNT', KEYS[1], string.format('(%d', now_ms()), '+inf')
`,
};

export class RedisConcurrencyLeases implements ConcurrencyLeases {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
  ) {}

  async acquire(key: string, limit: number, ttlMs: number): Promise<LeaseOutcome> {
    requireKey('key', key);
    requirePositiveInteger('limit', limit);
    requirePositiveInteger('ttlMs', ttlMs);
    const leaseId = randomUUID();
    const reply = await this.redis.script(
      'concurrency.acquire',
      ACQUIRE,
      [this.keys.concurrencyLeases(key)],
      [limit, ttlMs, leaseId],
    );
    if (integerAt(reply, 0) === 1) {
      return { granted: true, leaseId, active: integerAt(reply, 1), expiresAtMs: integerAt(reply, 2) };
    }
    return { granted: false, active: integerAt(reply, 1), retryAfterMs: integerAt(reply, 2) };
  }

  async renew(key: string, leaseId: string, ttlMs: number): Promise<boolean> {
    requireKey('key', key);
    requireKey('leaseId', leaseId);
    requirePositiveInteger('ttlMs', ttlMs);
    const reply = await this.redis.script(
      'concurrency.renew',
      RENEW,
      [this.keys.concurrencyLeases(key)],
      [leaseId, ttlMs],
    );
    return reply === 1;
  }

  async release(key: string, leaseId: string): Promise<boolean> {
    requireKey('key', key);
    requireKey('leaseId', leaseId);
    const reply = await this.redis.script(
      'concurrency.release',
      RELEASE,
      [this.keys.concurrencyLeases(key)],
      [leaseId],
    );
    return reply === 1;
  }

  async count(key: string): Promise<number> {
    requireKey('key', key);
    const reply = await this.redis.script('concurrency.count', COUNT, [this.keys.concurrencyLeases(key)], []);
    if (typeof reply !== 'number') throw new TypeError(`unexpected script reply ${JSON.stringify(reply)}`);
    return reply;
  }
}
