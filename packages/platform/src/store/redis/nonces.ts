import type { NonceAllocator } from '../store.js';
import { requireKey, requireNonNegativeInteger } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import type { LuaScript, RedisCommandRunner } from './redis-client.js';

// The key holds the next nonce to hand out. Reading it, lifting it to the chain's floor and moving it
// on happen in one script, so concurrent senders from one account never share a nonce.
const ALLOCATE: LuaScript = {
  name: 'svcStoreNonceAllocate',
  keys: 1,
  lua: `
local next_nonce = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if next_nonce < floor then next_nonce = floor end
redis.call('SET', KEYS[1], string.format('%d', next_nonce + 1))
return next_nonce
`,
};

export class RedisNonceAllocator implements NonceAllocator {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
  ) {}

  async allocate(account: string, chainNonceFloor: number): Promise<number> {
    requireKey('account', account);
    requireNonNegativeInteger('chainNonceFloor', chainNonceFloor);
    const reply = await this.redis.script(
      'nonces.allocate',
      ALLOCATE,
      [this.keys.nonce(account)],
      [chainNonceFloor],
    );
    if (typeof reply !== 'number') throw new TypeError(`unexpected script reply ${JSON.stringify(reply)}`);
    return reply;
  }

  async reset(account: string, nextNonce: number): Promise<void> {
    requireKey('account', account);
    requireNonNegativeInteger('nextNonce', nextNonce);
    await this.redis.command('nonces.reset', (client) => client.set(this.keys.nonce(account), nextNonce));
  }

  async peek(account: string): Promise<number | null> {
    requireKey('account', account);
    const value = await this.redis.command('nonces.peek', (client) => client.get(this.keys.nonce(account)));
    return value === null ? null : Number(value);
  }
}
