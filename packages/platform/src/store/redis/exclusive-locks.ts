import type { ExclusiveLocks, LockAttempt } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import { integerAt, LUA_NOW_MS, stringAt, type LuaScript, type RedisCommandRunner } from './redis-client.js';

// A lock is a string key holding its owner's id with a PX expiry; every owner check and change happens
// inside one script so an expired-and-retaken lock is never released or renewed by its former owner.
const TRY_ACQUIRE: LuaScript = {
  name: 'svcStoreLockTryAcquire',
  keys: 1,
  lua: `${LUA_NOW_MS}
local holder = redis.call('GET', KEYS[1])
if (not holder) or holder == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return {1, now_ms() + tonumber(ARGV[2])}
end
return {0, holder, redis.call('PTTL', KEYS[1])}
`,
};

const RENEW: LuaScript = {
  name: 'svcStoreLockRenew',
  keys: 1,
  lua: `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`,
};

const RELEASE: LuaScript = {
  name: 'svcStoreLockRelease',
  keys: 1,
  lua: `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`,
};

export class RedisExclusiveLocks implements ExclusiveLocks {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
  ) {}

  async tryAcquire(key: string, ownerId: string, ttlMs: number): Promise<LockAttempt> {
    requireKey('key', key);
    requireKey('ownerId', ownerId);
    requirePositiveInteger('ttlMs', ttlMs);
    const reply = await this.redis.script(
      'locks.tryAcquire',
      TRY_ACQUIRE,
      [this.keys.lock(key)],
      [ownerId, ttlMs],
    );
    if (integerAt(reply, 0) === 1) return { acquired: true, expiresAtMs: integerAt(reply, 1) };
    return { acquired: false, holderId: stringAt(reply, 1), retryAfterMs: Math.max(1, integerAt(reply, 2)) };
  }

  async renew(key: string, ownerId: string, ttlMs: number): Promise<boolean> {
    requireKey('key', key);
    requireKey('ownerId', ownerId);
    requirePositiveInteger('ttlMs', ttlMs);
    return (await this.redis.script('locks.renew', RENEW, [this.keys.lock(key)], [ownerId, ttlMs])) === 1;
  }

  async release(key: string, ownerId: string): Promise<boolean> {
    requireKey('key', key);
    requireKey('ownerId', ownerId);
    return (await this.redis.script('locks.release', RELEASE, [this.keys.lock(key)], [ownerId])) === 1;
  }

  async holder(key: string): Promise<string | null> {
    requireKey('key', key);
    return this.redis.command('locks.holder', (client) => client.get(this.keys.lock(key)));
  }
}
