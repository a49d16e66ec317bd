import { describe, expect, it } from '@jest/globals';
import { concurrently, uniqueKey, type UseFixture } from './fixture.js';

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (payload: Uint8Array): string => new TextDecoder().decode(payload);

export function queuesContract(use: UseFixture): void {
  describe('queues', () => {
    it('hands entries out oldest first, across replicas, and keeps them until removed', async () => {
      const [first, second] = use().replicas;
      const queue = uniqueKey('outbox');
      for (const [index, payload] of ['a', 'b', 'c'].entries())
        expect(await (index % 2 === 0 ? first : second).queues.push(queue, bytes(payload))).not.toBeNull();
      const head = await second.queues.peek(queue, 2);
      expect(head.map((entry) => text(entry.payload))).toEqual(['a', 'b']);
      // Peeking takes nothing away: a reader that died before removing hands the same entries on again.
      expect((await first.queues.peek(queue, 10)).map((entry) => text(entry.payload))).toEqual([
        'a',
        'b',
        'c',
      ]);
      expect(
        await first.queues.remove(
          queue,
          head.map((entry) => entry.id),
        ),
      ).toBe(2);
      expect(
        await second.queues.remove(
          queue,
          head.map((entry) => entry.id),
        ),
      ).toBe(0);
      expect((await second.queues.peek(queue, 10)).map((entry) => text(entry.payload))).toEqual(['c']);
      expect(await first.queues.length(queue)).toBe(1);
    });

    it('keeps binary payloads exact', async () => {
      const [store] = use().replicas;
      const queue = uniqueKey('outbox');
      const payload = Uint8Array.from([0, 255, 10, 13, 0, 128]);
      await store.queues.push(queue, payload);
      expect((await store.queues.peek(queue, 1))[0]?.payload).toEqual(payload);
    });

    it('refuses a push past maxLength atomically, however many replicas push at once', async () => {
      const { replicas } = use();
      const queue = uniqueKey('outbox');
      const ids = await concurrently(replicas, 20, (store, index) =>
        store.queues.push(queue, bytes(String(index)), 5),
      );
      expect(ids.filter((id) => id !== null)).toHaveLength(5);
      expect(await replicas[0].queues.length(queue)).toBe(5);
      // Without a bound the push goes through: what the caller must not refuse.
      expect(await replicas[1].queues.push(queue, bytes('late'))).not.toBeNull();
      expect(await replicas[0].queues.length(queue)).toBe(6);
    });

    it('is empty for a queue never pushed to, and keeps queues apart', async () => {
      const [store] = use().replicas;
      const [one, other] = [uniqueKey('outbox'), uniqueKey('outbox')];
      expect(await store.queues.peek(one, 5)).toEqual([]);
      expect(await store.queues.length(one)).toBe(0);
      await store.queues.push(one, bytes('x'));
      expect(await store.queues.length(other)).toBe(0);
    });
  });
}
