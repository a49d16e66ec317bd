import type { CounterIncrementOptions, Counters } from '../store.js';
import { requireKey, requirePositiveInteger, toCounterIncrement } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import { type LuaScript, type RedisCommandRunner } from './redis-client.js';

// Redis would hand HINCRBY's result back through a Lua or JavaScript double and lose precision above
// 2^53, so the script returns the field as a string (HGET), which becomes an exact bigint here.
const INCREMENT: LuaScript = {
  name: 'svcStoreCounterIncrement',
  keys: 1,
  lua: `
redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '' and redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return redis.call('HGET', KEYS[1], ARGV[1])
`,
};

export class RedisCounters implements Counters {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
  ) {}

  async increment(
    key: string,
    field: string,
    by: bigint | number = 1n,
    options: CounterIncrementOptions = {},
  ): Promise<bigint> {
    requireKey('key', key);
    requireKey('field', field);
    const amount = toCounterIncrement(by);
    if (options.ttlMs !== undefined) requirePositiveInteger('ttlMs', options.ttlMs);
    const reply = await this.redis.script(
      'counters.increment',
      INCREMENT,
      [this.keys.counters(key)],
      [field, amount.toString(), options.ttlMs ?? ''],
    );
    if (typeof reply !== 'string') throw new TypeError(`unexpected script reply ${JSON.stringify(reply)}`);
    return BigInt(reply);
  }

  async get(key: string): Promise<Record<string, bigint>> {
    requireKey('key', key);
    const fields = await this.redis.command('counters.get', (client) =>
      client.hgetall(this.keys.counters(key)),
    );
    return Object.fromEntries(Object.entries(fields).map(([field, value]) => [field, BigInt(value)]));
  }

  async delete(key: string): Promise<boolean> {
    requireKey('key', key);
    return (
      (await this.redis.command('counters.delete', (client) => client.del(this.keys.counters(key)))) === 1
    );
  }
}
