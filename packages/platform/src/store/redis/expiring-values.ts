import type { ExpiringValues } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import type { LuaScript, RedisCommandRunner } from './redis-client.js';

const COMPARE_AND_DELETE: LuaScript = {
  name: 'svcStoreValueCompareAndDelete',
  keys: 1,
  lua: `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`,
};

export class RedisExpiringValues implements ExpiringValues {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
  ) {}

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    requireKey('key', key);
    requirePositiveInteger('ttlMs', ttlMs);
    await this.redis.command('values.set', (client) => client.set(this.keys.value(key), value, 'PX', ttlMs));
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    requireKey('key', key);
    requirePositiveInteger('ttlMs', ttlMs);
    const reply = await this.redis.command('values.setIfAbsent', (client) =>
      client.set(this.keys.value(key), value, 'PX', ttlMs, 'NX'),
    );
    return reply === 'OK';
  }

  async get(key: string): Promise<string | null> {
    requireKey('key', key);
    return this.redis.command('values.get', (client) => client.get(this.keys.value(key)));
  }

  async take(key: string): Promise<string | null> {
    requireKey('key', key);
    return this.redis.command('values.take', (client) => client.getdel(this.keys.value(key)));
  }

  async delete(key: string): Promise<boolean> {
    requireKey('key', key);
    return (await this.redis.command('values.delete', (client) => client.del(this.keys.value(key)))) === 1;
  }

  async compareAndDelete(key: string, expected: string): Promise<boolean> {
    requireKey('key', key);
    const reply = await this.redis.script(
      'values.compareAndDelete',
      COMPARE_AND_DELETE,
      [this.keys.value(key)],
      [expected],
    );
    return reply === 1;
  }
}
