import type { QueuedEntry, QueueEntryId, Queues } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import type { LuaScript, RedisCommandRunner } from './redis-client.js';

// One Redis Stream per queue (field `p` = payload bytes). The bound is checked and the entry added in one
// script, so concurrent pushers never pass it together. Streams keep insertion order and never expire.
const PUSH: LuaScript = {
  name: 'svcStoreQueuePush',
  keys: 1,
  lua: `
if ARGV[2] ~= '' and redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[2]) then return false end
return redis.call('XADD', KEYS[1], '*', 'p', ARGV[1])
`,
};

export class RedisQueues implements Queues {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
  ) {}

  async push(queue: string, payload: Uint8Array, maxLength?: number): Promise<QueueEntryId | null> {
    requireKey('queue', queue);
    if (maxLength !== undefined) requirePositiveInteger('maxLength', maxLength);
    const reply = await this.redis.script(
      'queues.push',
      PUSH,
      [this.keys.queue(queue)],
      [Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength), maxLength ?? ''],
    );
    return typeof reply === 'string' ? reply : null;
  }

  async peek(queue: string, count: number): Promise<QueuedEntry[]> {
    requireKey('queue', queue);
    requirePositiveInteger('count', count);
    const entries = await this.redis.command('queues.peek', (client) =>
      client.xrangeBuffer(this.keys.queue(queue), '-', '+', 'COUNT', count),
    );
    return entries.map(([id, fields]) => ({ id: id.toString(), payload: payloadOf(fields) }));
  }

  async remove(queue: string, ids: readonly QueueEntryId[]): Promise<number> {
    requireKey('queue', queue);
    if (ids.length === 0) return 0;
    return this.redis.command('queues.remove', (client) => client.xdel(this.keys.queue(queue), ...ids));
  }

  length(queue: string): Promise<number> {
    requireKey('queue', queue);
    return this.redis.command('queues.length', (client) => client.xlen(this.keys.queue(queue)));
  }
}

/**
 * An entry's payload; empty for an entry `push` did not write (added by hand), so that the reader can
 * see it is not one of its own and remove it, rather than every read failing on it.
 */
function payloadOf(fields: Buffer[]): Uint8Array {
  for (let i = 0; i + 1 < fields.length; i += 2)
    if (fields[i]?.toString() === 'p') return new Uint8Array(fields[i + 1] as Buffer);
  return new Uint8Array();
}
