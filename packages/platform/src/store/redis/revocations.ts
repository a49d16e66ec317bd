import { randomUUID } from 'node:crypto';
import type { MarkerHitOutcome, MarkerHitWindows, RevocationMarkers } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import { integerAt, LUA_NOW_MS, type LuaScript, type RedisCommandRunner } from './redis-client.js';
import { LUA_RATE_WINDOW_HIT, rateWindowVerdictAt } from './rate-windows.js';

// The marker, then one hit on the window it picks, as one script (one round trip). Its three keys do not
// share a slot (the revocation set is one key for every id): like the store as a whole, it needs one Redis
// server, not a Cluster.
const HIT_BY_MARKER: LuaScript = {
  name: 'svcStoreRevocationHitByMarker',
  keys: 3,
  lua: `${LUA_NOW_MS}${LUA_RATE_WINDOW_HIT}
local marked = redis.call('SISMEMBER', KEYS[1], ARGV[1])
local verdict
if marked == 1 then
  verdict = rate_window_hit(KEYS[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6])
else
  verdict = rate_window_hit(KEYS[2], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[6])
end
return {marked, verdict[1], verdict[2], verdict[3], verdict[4]}
`,
};

// One set without expiry: a revoked id must stay revoked for good, and a set answers a batch in one
// SMISMEMBER.
export class RedisRevocationMarkers implements RevocationMarkers {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
  ) {}

  async mark(id: string): Promise<void> {
    requireKey('id', id);
    await this.redis.command('revocations.mark', (client) => client.sadd(this.keys.revocations(), id));
  }

  async isMarked(id: string): Promise<boolean> {
    requireKey('id', id);
    const reply = await this.redis.command('revocations.isMarked', (client) =>
      client.sismember(this.keys.revocations(), id),
    );
    return reply === 1;
  }

  async markedAmong(ids: readonly string[]): Promise<Set<string>> {
    for (const id of ids) requireKey('id', id);
    if (ids.length === 0) return new Set();
    const flags = await this.redis.command('revocations.markedAmong', (client) =>
      client.smismember(this.keys.revocations(), ...ids),
    );
    return new Set(ids.filter((_, index) => flags[index] === 1));
  }

  async hitByMarker(id: string, { ifClear, ifMarked }: MarkerHitWindows): Promise<MarkerHitOutcome> {
    requireKey('id', id);
    for (const { key, limit, windowMs } of [ifClear, ifMarked]) {
      requireKey('key', key);
      requirePositiveInteger('limit', limit);
      requirePositiveInteger('windowMs', windowMs);
    }
    const reply = await this.redis.script(
      'revocations.hitByMarker',
      HIT_BY_MARKER,
      [this.keys.revocations(), this.keys.rateWindow(ifClear.key), this.keys.rateWindow(ifMarked.key)],
      [id, ifClear.limit, ifClear.windowMs, ifMarked.limit, ifMarked.windowMs, randomUUID()],
    );
    const marked = integerAt(reply, 0) === 1;
    return { marked, verdict: rateWindowVerdictAt(reply, 1, marked ? ifMarked.limit : ifClear.limit) };
  }
}
