import { describe, expect, it } from '@jest/globals';
import { sleep, uniqueKey, type UseFixture } from './fixture.js';

export function presenceContract(use: UseFixture): void {
  describe('presence', () => {
    it('lists the live members of a group with their values, sorted by member', async () => {
      const [first, second] = use().replicas;
      const group = uniqueKey('workers');
      const before = Date.now();
      await first.presence.announce(group, 'worker-b', '{"models":["llama3:8b"],"free":2}', 60_000);
      await second.presence.announce(group, 'worker-a', '{"models":["tiny"],"free":1}', 60_000);
      const entries = await first.presence.list(group);
      expect(entries.map(({ member, value }) => ({ member, value }))).toEqual([
        { member: 'worker-a', value: '{"models":["tiny"],"free":1}' },
        { member: 'worker-b', value: '{"models":["llama3:8b"],"free":2}' },
      ]);
      for (const entry of entries) expect(entry.expiresAtMs).toBeGreaterThan(before + 50_000);
      expect(await second.presence.list(uniqueKey('workers'))).toEqual([]);
    });

    it('replaces a member’s value when it announces again', async () => {
      const [first, second] = use().replicas;
      const group = uniqueKey('workers');
      await first.presence.announce(group, 'worker-a', 'free=1', 60_000);
      await second.presence.announce(group, 'worker-a', 'free=0', 60_000);
      expect((await first.presence.list(group)).map((e) => e.value)).toEqual(['free=0']);
    });

    it('drops a member once its TTL passes, unless it announced again in time', async () => {
      const [first, second] = use().replicas;
      const group = uniqueKey('workers');
      await first.presence.announce(group, 'silent', 'x', 400);
      await first.presence.announce(group, 'heartbeating', 'y', 400);
      await second.presence.announce(group, 'long-lived', 'z', 60_000);
      await sleep(250);
      await second.presence.announce(group, 'heartbeating', 'y', 400);
      await sleep(250);
      expect((await first.presence.list(group)).map((e) => e.member)).toEqual(['heartbeating', 'long-lived']);
      await sleep(300);
      expect((await second.presence.list(group)).map((e) => e.member)).toEqual(['long-lived']);
    });

    it('withdraws a member at once', async () => {
      const [first, second] = use().replicas;
      const group = uniqueKey('workers');
      await first.presence.announce(group, 'worker-a', 'x', 60_000);
      await first.presence.announce(group, 'worker-b', 'y', 60_000);
      expect(await second.presence.withdraw(group, 'worker-a')).toBe(true);
      expect(await second.presence.withdraw(group, 'worker-a')).toBe(false);
      expect((await first.presence.list(group)).map((e) => e.member)).toEqual(['worker-b']);
    });
  });
}
