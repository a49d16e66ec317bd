import type { Presence, PresenceEntry } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import type { MemoryContext } from './memory-context.js';

interface Announcement {
  readonly value: string;
  readonly expiresAtMs: number;
}

export class MemoryPresence implements Presence {
  readonly #groups = new Map<string, Map<string, Announcement>>();

  constructor(private readonly context: MemoryContext) {}

  async announce(group: string, member: string, value: string, ttlMs: number): Promise<void> {
    requireKey('group', group);
    requireKey('member', member);
    requirePositiveInteger('ttlMs', ttlMs);
    this.context.assertOpen('presence.announce');
    const members = this.#groups.get(group) ?? new Map<string, Announcement>();
    members.set(member, { value, expiresAtMs: this.context.now() + ttlMs });
    this.#groups.set(group, members);
  }

  async list(group: string): Promise<PresenceEntry[]> {
    requireKey('group', group);
    this.context.assertOpen('presence.list');
    const now = this.context.now();
    const entries: PresenceEntry[] = [];
    for (const [member, { value, expiresAtMs }] of this.#groups.get(group) ?? []) {
      if (expiresAtMs > now) entries.push({ member, value, expiresAtMs });
    }
    return entries.sort((a, b) => (a.member < b.member ? -1 : a.member > b.member ? 1 : 0));
  }

  async withdraw(group: string, member: string): Promise<boolean> {
    requireKey('group', group);
    requireKey('member', member);
    this.context.assertOpen('presence.withdraw');
    const members = this.#groups.get(group);
    const announcement = members?.get(member);
    if (members === undefined || announcement === undefined) return false;
    members.delete(member);
    if (members.size === 0) this.#groups.delete(group);
    return announcement.expiresAtMs > this.context.now();
  }

  sweep(now: number): void {
    for (const [group, members] of this.#groups) {
      for (const [member, { expiresAtMs }] of members) {
        if (expiresAtMs <= now) members.delete(member);
      }
      if (members.size === 0) this.#groups.delete(group);
    }
  }
}
