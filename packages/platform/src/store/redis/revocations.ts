import { randomUUID } from 'node:crypto';
import type { MarkerHitOutcome, MarkerHitWindows, RateWindowHit, RevocationMarkers } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import { RedisKeyspace } from './keys.js';
import { integerAt, LUA_NOW_MS, type LuaScript, type RedisCommandRunner } from './redis-client.js';
import { LUA_RATE_WINDOW_HIT, RATE_WINDOW_HIT, rateWindowVerdictAt } from './rate-windows.js';

// On one server: the id's marker or its entry in the set of earlier releases (see legacyRevocations).
const LUA_MARKED_EITHER_WAY = `
local function marked(marker, legacy, id)
  if redis.call('EXISTS', marker) == 1 then return 1 end
  return redis.call('SISMEMBER', legacy, id)
end
`;

const MARK_BOTH: LuaScript = {
  name: 'svcStoreRevocationMarkBoth',
  keys: 2,
  lua: `redis.call('SET', KEYS[1], '1')
redis.call('SADD', KEYS[2], ARGV[1])
return 1
`,
};

const IS_MARKED_EITHER_WAY: LuaScript = {
  name: 'svcStoreRevocationIsMarked',
  keys: 2,
  lua: `${LUA_MARKED_EITHER_WAY}
return marked(KEYS[1], KEYS[2], ARGV[1])
`,
};

// One server: the marker, then one hit on the window it picks, as one script (one round trip). The keys need
// not share a slot there.
const HIT_BY_MARKER: LuaScript = {
  name: 'svcStoreRevocationHitByMarker',
  keys: 4,
  lua: `${LUA_NOW_MS}${LUA_RATE_WINDOW_HIT}${LUA_MARKED_EITHER_WAY}
local verdict
local is_marked = marked(KEYS[1], KEYS[2], ARGV[1])
if is_marked == 1 then
  verdict = rate_window_hit(KEYS[4], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6])
else
  verdict = rate_window_hit(KEYS[3], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[6])
end
return {is_marked, verdict[1], verdict[2], verdict[3], verdict[4]}
`,
};

// A cluster, the marker and the clear window in one slot: the hit when the id is not marked, in one script;
// {1} alone when it is (the marked window, elsewhere, is counted next).
const HIT_UNLESS_MARKED: LuaScript = {
  name: 'svcStoreRevocationHitUnlessMarked',
  keys: 2,
  lua: `${LUA_NOW_MS}${LUA_RATE_WINDOW_HIT}
if redis.call('EXISTS', KEYS[1]) == 1 then return {1} end
local verdict = rate_window_hit(KEYS[2], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3])
return {0, verdict[1], verdict[2], verdict[3], verdict[4]}
`,
};

/**
 * A marker per id (`<ns>:revoked:{<id>}`) without expiry: a revoked id stays revoked for good. On a single
 * server every call also reads (and `mark` also writes) the set earlier releases kept, so replicas of both
 * agree during a rolling upgrade. On a cluster, `hitByMarker` is one script when the id's marker and the
 * clear window share a hash tag (the gateway tags a key's window with its id); a marked id's hit is then
 * counted in a second step, which is still atomic in effect because a marker is never removed.
 */
export class RedisRevocationMarkers implements RevocationMarkers {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
    private readonly cluster: boolean,
  ) {}

  async mark(id: string): Promise<void> {
    requireKey('id', id);
    if (this.cluster) {
      await this.redis.command('revocations.mark', (client) =>
        client.set(this.keys.revocationMarker(id), '1'),
      );
      return;
    }
    await this.redis.script(
      'revocations.mark',
      MARK_BOTH,
      [this.keys.revocationMarker(id), this.keys.legacyRevocations()],
      [id],
    );
  }

  async isMarked(id: string): Promise<boolean> {
    requireKey('id', id);
    return this.#isMarked('revocations.isMarked', id);
  }

  /** One read per id (sent together): on a cluster the markers are in as many slots as ids. */
  async markedAmong(ids: readonly string[]): Promise<Set<string>> {
    for (const id of ids) requireKey('id', id);
    const flags = await Promise.all(ids.map((id) => this.#isMarked('revocations.markedAmong', id)));
    return new Set(ids.filter((_, index) => flags[index]));
  }

  async hitByMarker(id: string, { ifClear, ifMarked }: MarkerHitWindows): Promise<MarkerHitOutcome> {
    requireKey('id', id);
    for (const { key, limit, windowMs } of [ifClear, ifMarked]) {
      requireKey('key', key);
      requirePositiveInteger('limit', limit);
      requirePositiveInteger('windowMs', windowMs);
    }
    const operation = 'revocations.hitByMarker';
    const marker = this.keys.revocationMarker(id);
    const clearWindow = this.keys.rateWindow(ifClear.key);
    if (!this.cluster) {
      const reply = await this.redis.script(
        operation,
        HIT_BY_MARKER,
        [marker, this.keys.legacyRevocations(), clearWindow, this.keys.rateWindow(ifMarked.key)],
        [id, ifClear.limit, ifClear.windowMs, ifMarked.limit, ifMarked.windowMs, randomUUID()],
      );
      const marked = integerAt(reply, 0) === 1;
      return { marked, verdict: rateWindowVerdictAt(reply, 1, marked ? ifMarked.limit : ifClear.limit) };
    }
    if (RedisKeyspace.sameSlot(marker, clearWindow)) {
      const reply = await this.redis.script(
        operation,
        HIT_UNLESS_MARKED,
        [marker, clearWindow],
        [ifClear.limit, ifClear.windowMs, randomUUID()],
      );
      if (integerAt(reply, 0) === 0)
        return { marked: false, verdict: rateWindowVerdictAt(reply, 1, ifClear.limit) };
      return { marked: true, verdict: await this.#hit(operation, ifMarked) };
    }
    // Keys in different slots: the marker, then the window. A call racing a revocation may count once more
    // in the revoked id's window, as if it had come just before the revocation.
    const marked = await this.#isMarked(operation, id);
    return { marked, verdict: await this.#hit(operation, marked ? ifMarked : ifClear) };
  }

  async #isMarked(operation: string, id: string): Promise<boolean> {
    const marker = this.keys.revocationMarker(id);
    if (this.cluster) return (await this.redis.command(operation, (client) => client.exists(marker))) === 1;
    const reply = await this.redis.script(
      operation,
      IS_MARKED_EITHER_WAY,
      [marker, this.keys.legacyRevocations()],
      [id],
    );
    return reply === 1;
  }

  async #hit(operation: string, { key, limit, windowMs }: RateWindowHit) {
    const reply = await this.redis.script(
      operation,
      RATE_WINDOW_HIT,
      [this.keys.rateWindow(key)],
      [limit, windowMs, randomUUID()],
    );
    return rateWindowVerdictAt(reply, 0, limit);
  }
}
