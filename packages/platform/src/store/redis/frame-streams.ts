import type { Frame, FrameAppendResult, FrameCursor, FrameReadOptions, FrameStreams } from '../store.js';
import {
  requireFrameCursor,
  requireKey,
  requireNonNegativeInteger,
  requirePositiveInteger,
} from '../validation.js';
import type { BlockingConnectionPool } from './blocking-connections.js';
import type { RedisKeyspace } from './keys.js';
import { integerAt, stringAt, type LuaScript, type RedisCommandRunner } from './redis-client.js';
import type { RedisClient } from './redis-connection.js';

const DEFAULT_READ_COUNT = 100;

// One Redis Stream per job plus a hash of the dedup ids already appended (id → stream entry id), both
// written by one script so a frame re-sent after a worker reconnect can never be appended twice. The
// hash follows the stream's expiry.
const APPEND: LuaScript = {
  name: 'svcStoreFrameAppend',
  keys: 2,
  lua: `
local existing = redis.call('HGET', KEYS[2], ARGV[1])
if existing then return {0, existing} end
local id = redis.call('XADD', KEYS[1], '*', 'd', ARGV[1], 'p', ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], id)
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return {1, id}
`,
};

const EXPIRE: LuaScript = {
  name: 'svcStoreFrameExpire',
  keys: 2,
  lua: `
local found = redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return found
`,
};

export class RedisFrameStreams implements FrameStreams {
  constructor(
    private readonly redis: RedisCommandRunner,
    private readonly keys: RedisKeyspace,
    private readonly blockingConnections: BlockingConnectionPool,
  ) {}

  async append(streamKey: string, dedupId: string, payload: Uint8Array): Promise<FrameAppendResult> {
    requireKey('streamKey', streamKey);
    requireKey('dedupId', dedupId);
    const reply = await this.redis.script(
      'frames.append',
      APPEND,
      [this.keys.frameStream(streamKey), this.keys.frameDedupIds(streamKey)],
      [dedupId, Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength)],
    );
    return { appended: integerAt(reply, 0) === 1, cursor: stringAt(reply, 1) };
  }

  async read(streamKey: string, after: FrameCursor | null, options: FrameReadOptions = {}): Promise<Frame[]> {
    requireKey('streamKey', streamKey);
    if (after !== null) requireFrameCursor(after);
    const blockMs = options.blockMs ?? 0;
    const count = options.count ?? DEFAULT_READ_COUNT;
    requireNonNegativeInteger('blockMs', blockMs);
    requirePositiveInteger('count', count);
    const key = this.keys.frameStream(streamKey);
    const cursor = after ?? '0-0';
    // The local clock only bounds how long this caller waits; it decides nothing shared.
    const deadline = Date.now() + blockMs;

    // Frames already there are read on the shared connection; only a read that must wait takes a
    // dedicated one. The explicit cursor means a frame appended in between is still seen.
    const ready = await this.redis.command('frames.read', (client) =>
      readStream(client, key, cursor, count, 0),
    );
    if (ready.length > 0 || blockMs === 0) return ready;
    try {
      return await this.blockingConnections.withConnection('frames.read', (connection) =>
        readStream(connection, key, cursor, count, Math.max(0, deadline - Date.now())),
      );
    } catch (error) {
      throw this.redis.toStoreError('frames.read', error);
    }
  }

  async expire(streamKey: string, ttlMs: number): Promise<boolean> {
    requireKey('streamKey', streamKey);
    requirePositiveInteger('ttlMs', ttlMs);
    const reply = await this.redis.script(
      'frames.expire',
      EXPIRE,
      [this.keys.frameStream(streamKey), this.keys.frameDedupIds(streamKey)],
      [ttlMs],
    );
    return reply === 1;
  }
}

async function readStream(
  client: RedisClient,
  key: string,
  cursor: string,
  count: number,
  blockMs: number,
): Promise<Frame[]> {
  const reply =
    blockMs > 0
      ? await client.xreadBuffer('COUNT', count, 'BLOCK', blockMs, 'STREAMS', key, cursor)
      : await client.xreadBuffer('COUNT', count, 'STREAMS', key, cursor);
  if (reply === null) return [];
  const [stream] = reply;
  return (stream?.[1] ?? []).map(([id, fields]) => toFrame(id, fields));
}

function toFrame(id: Buffer, fields: Buffer[]): Frame {
  let dedupId: string | undefined;
  let payload: Uint8Array | undefined;
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]?.toString('utf8');
    const value = fields[i + 1] as Buffer;
    if (name === 'd') dedupId = value.toString('utf8');
    else if (name === 'p') payload = new Uint8Array(value);
  }
  if (dedupId === undefined || payload === undefined) {
    throw new TypeError(`frame ${id.toString('utf8')} lacks its dedup id or payload`);
  }
  return { cursor: id.toString('utf8'), dedupId, payload };
}
