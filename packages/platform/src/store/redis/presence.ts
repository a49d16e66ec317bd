import type { Presence, PresenceEntry } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import { LUA_NOW_MS, type LuaScript, type RedisCommandRunner } from './redis-client.js';

// Per group: a sorted set of members scored by expiry (which members are live) and a hash of their
// values. Announcing purges the members that lapsed; both keys expire with the last live member.
const ANNOUNCE: LuaScript = {
  name: 'svcStorePresenceAnnounce',
  keys: 2,
  lua: `${LUA_NOW_MS}
local now = now_ms()
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, member in ipairs(lapsed) do redis.call('HDEL', KEYS[2], member) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
redis.call('PEXPIREAT', KEYS[2], last[2])
return 1
`,
};

const LIST: LuaScript = {
  name: 'svcStorePresenceList',
  keys: 2,
  lua: `${LUA_NOW_MS}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], string.format('(%d', now_ms()), '+inf', 'WITHSCORES')
local entries = {}
for i = 1, #live, 2 do
  local value = redis.call('HGET', KEYS[2], live[i])
  if value then
    entries[#entries + 1] = live[i]
    entries[#entries + 1] = value
    entries[#entries + 1] = tonumber(live[i + 1])
  end
end
return entries
`,
};

const WITHDRAW: LuaScript = {
  name: 'svcStorePresenceWithdraw',
  keys: 2,
  lua: `${LUA_NOW_MS}
local expires = redis.call('ZSCORE', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if expires and tonumber(expires) > now_ms() then return 1 end
return 0
`,
};

export class RedisPresence implements Presence {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
  ) {}

  async announce(group: string, member: string, value: string, ttlMs: number): Promise<void> {
    requireKey('group', group);
    requireKey('member', member);
    requirePositiveInteger('ttlMs', ttlMs);
    await this.redis.script('presence.announce', ANNOUNCE, this.#keysOf(group), [member, value, ttlMs]);
  }

  async list(group: string): Promise<PresenceEntry[]> {
    requireKey('group', group);
    const reply = await this.redis.script('presence.list', LIST, this.#keysOf(group), []);
    const flat = reply as Array<string | number>;
    const entries: PresenceEntry[] = [];
    for (let i = 0; i + 2 < flat.length; i += 3) {
      entries.push({ member: String(flat[i]), value: String(flat[i + 1]), expiresAtMs: Number(flat[i + 2]) });
    }
    return entries.sort((a, b) => (a.member < b.member ? -1 : a.member > b.member ? 1 : 0));
  }

  async withdraw(group: string, member: string): Promise<boolean> {
    requireKey('group', group);
    requireKey('member', member);
    return (await this.redis.script('presence.withdraw', WITHDRAW, this.#keysOf(group), [member])) === 1;
  }

  #keysOf(group: string): string[] {
    return [this.keys.presenceExpiries(group), this.keys.presenceValues(group)];
  }
}
