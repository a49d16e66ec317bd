import type { RevocationMarkers } from '../store.js';
import { requireKey } from '../validation.js';
import type { RedisKeyspace } from './keys.js';
import type { RedisCommandRunner } from './redis-client.js';

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
}
