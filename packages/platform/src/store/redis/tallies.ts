import { randomUUID } from 'node:crypto';
import type { Tallies, TallyBatch, TallyClaimOptions, TallyPending } from '../store.js';
import {
  DEFAULT_TALLY_BATCH_FIELDS,
  requireKey,
  requirePositiveInteger,
  toTallyIncrement,
} from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import { stringAt, type LuaScript, type RedisCommandRunner } from './redis-client.js';

// A tally is four keys under one hash tag: the open counts (a hash that HINCRBY grows), the sealed batch's
// counts (a hash), the sealed batch's id and the claim on it (a string owned by the claimant, with PX).
// Sealing renames the open hash (or moves up to maxFields of it), so an increment lands either in the batch
// or in the open counts that follow it, never in both and never in neither.
const CLAIM: LuaScript = {
  name: 'svcStoreTallyClaim',
  keys: 4,
  lua: `
local batch_id = redis.call('GET', KEYS[3])
if batch_id then
  local holder = redis.call('GET', KEYS[4])
  if holder and holder ~= ARGV[1] then return false end
else
  local size = redis.call('HLEN', KEYS[1])
  if size == 0 then return false end
  local max_fields = tonumber(ARGV[3])
  if size <= max_fields then
    redis.call('RENAME', KEYS[1], KEYS[2])
  else
    local moved = 0
    local cursor = '0'
    repeat
      local page = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', max_fields)
      cursor = page[1]
      local entries = page[2]
      local i = 1
      while i < #entries and moved < max_fields do
        redis.call('HSET', KEYS[2], entries[i], entries[i + 1])
        redis.call('HDEL', KEYS[1], entries[i])
        moved = moved + 1
        i = i + 2
      end
    until cursor == '0' or moved >= max_fields
  end
  batch_id = ARGV[4]
  redis.call('SET', KEYS[3], batch_id)
end
redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[2])
return {batch_id, redis.call('HGETALL', KEYS[2])}
`,
};

const ACKNOWLEDGE: LuaScript = {
  name: 'svcStoreTallyAcknowledge',
  keys: 3,
  lua: `
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return 1
`,
};

// Reads the fields' open counts, the sealed batch's id and the fields' sealed counts in one step: a seal or
// an acknowledgement runs wholly before or wholly after it. HMGET in pages keeps `unpack` within Lua's limits.
const PENDING: LuaScript = {
  name: 'svcStoreTallyPending',
  keys: 3,
  lua: `
local function read(key)
  local values = {}
  for first = 1, #ARGV, 1000 do
    local page = redis.call('HMGET', key, unpack(ARGV, first, math.min(first + 999, #ARGV)))
    for i = 1, #page do values[#values + 1] = page[i] end
  end
  return values
end
local batch_id = redis.call('GET', KEYS[3])
if not batch_id then return {read(KEYS[1])} end
return {read(KEYS[1]), batch_id, read(KEYS[2])}
`,
};

export class RedisTallies implements Tallies {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
  ) {}

  async add(tally: string, field: string, by: bigint | number = 1n): Promise<void> {
    requireKey('tally', tally);
    requireKey('field', field);
    const amount = toTallyIncrement(by);
    await this.redis.command('tallies.add', (client) =>
      client.hincrby(this.keys.tallyOpen(tally), field, amount.toString()),
    );
  }

  async claim(tally: string, claimant: string, options: TallyClaimOptions): Promise<TallyBatch | null> {
    requireKey('tally', tally);
    requireKey('claimant', claimant);
    requirePositiveInteger('claimTtlMs', options.claimTtlMs);
    const maxFields = options.maxFields ?? DEFAULT_TALLY_BATCH_FIELDS;
    requirePositiveInteger('maxFields', maxFields);
    const reply = await this.redis.script(
      'tallies.claim',
      CLAIM,
      [
        this.keys.tallyOpen(tally),
        this.keys.tallySealed(tally),
        this.keys.tallyBatchId(tally),
        this.keys.tallyClaim(tally),
      ],
      [claimant, options.claimTtlMs, maxFields, randomUUID()],
    );
    if (reply === null) return null;
    const entries = Array.isArray(reply) ? (reply[1] as unknown) : undefined;
    if (!Array.isArray(entries)) throw new TypeError(`unexpected script reply ${JSON.stringify(reply)}`);
    const counts: Record<string, bigint> = {};
    for (let i = 0; i + 1 < entries.length; i += 2) {
      counts[stringAt(entries, i)] = BigInt(stringAt(entries, i + 1));
    }
    return { batchId: stringAt(reply, 0), counts };
  }

  async acknowledge(tally: string, batchId: string): Promise<boolean> {
    requireKey('tally', tally);
    requireKey('batchId', batchId);
    const reply = await this.redis.script(
      'tallies.acknowledge',
      ACKNOWLEDGE,
      [this.keys.tallySealed(tally), this.keys.tallyBatchId(tally), this.keys.tallyClaim(tally)],
      [batchId],
    );
    return reply === 1;
  }

  async pending(tally: string, fields: readonly string[]): Promise<TallyPending> {
    requireKey('tally', tally);
    for (const field of fields) requireKey('field', field);
    if (fields.length === 0) return { open: {}, sealed: null };
    const reply = await this.redis.script(
      'tallies.pending',
      PENDING,
      [this.keys.tallyOpen(tally), this.keys.tallySealed(tally), this.keys.tallyBatchId(tally)],
      fields,
    );
    if (!Array.isArray(reply)) throw new TypeError(`unexpected script reply ${JSON.stringify(reply)}`);
    const open = countsOf(fields, reply[0]);
    if (reply.length < 3) return { open, sealed: null };
    const sealedCounts = countsOf(fields, reply[2]);
    const sealed =
      Object.keys(sealedCounts).length === 0 ? null : { batchId: stringAt(reply, 1), counts: sealedCounts };
    return { open, sealed };
  }
}

/** The HMGET values of `fields` (null for a field the hash does not hold) as counts, absent ones left out. */
function countsOf(fields: readonly string[], values: unknown): Record<string, bigint> {
  if (!Array.isArray(values) || values.length !== fields.length)
    throw new TypeError(`unexpected script reply ${JSON.stringify(values)}`);
  const counts: Record<string, bigint> = {};
  values.forEach((value, index) => {
    if (value === null) return;
    if (typeof value !== 'string') throw new TypeError(`unexpected script reply ${JSON.stringify(values)}`);
    counts[fields[index] as string] = BigInt(value);
  });
  return counts;
}
