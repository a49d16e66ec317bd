import type { Struct } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from '@jest/globals';
import { dedupeByEventId, InMemoryProcessedEventIds, type ReceivedEvent } from '../../src/events/index.js';
import { sampleEvent } from './fixtures.js';

function delivery(eventId: string, attempt = 1): ReceivedEvent<Struct> {
  return {
    topic: 't',
    message: sampleEvent({ eventId, key: 'k', seq: 0 }),
    eventId,
    key: 'k',
    typeName: 'google.protobuf.Struct',
    requestId: undefined,
    publishedAt: new Date(),
    attempt,
  };
}

describe('dedupeByEventId', () => {
  it('applies each event id once however often it is delivered', async () => {
    const applied: string[] = [];
    const handler = dedupeByEventId(new InMemoryProcessedEventIds(), async (event: ReceivedEvent<Struct>) => {
      applied.push(event.eventId);
    });

    for (const id of ['a', 'b', 'a', 'c', 'b', 'a']) await handler(delivery(id));

    expect(applied).toEqual(['a', 'b', 'c']);
  });

  it('applies an id once when its duplicates arrive concurrently', async () => {
    let applied = 0;
    const handler = dedupeByEventId(new InMemoryProcessedEventIds(), async () => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      applied += 1;
    });

    await Promise.all(Array.from({ length: 20 }, () => handler(delivery('same'))));

    expect(applied).toBe(1);
  });

  it('handles the retry of an event whose first attempt failed', async () => {
    const applied: number[] = [];
    const handler = dedupeByEventId(new InMemoryProcessedEventIds(), async (event: ReceivedEvent<Struct>) => {
      if (event.attempt === 1) throw new Error('database unavailable');
      applied.push(event.attempt);
    });

    await expect(handler(delivery('x', 1))).rejects.toThrow('database unavailable');
    await handler(delivery('x', 2));
    await handler(delivery('x', 3));

    expect(applied).toEqual([2]);
  });
});

describe('InMemoryProcessedEventIds', () => {
  it('forgets the oldest ids beyond its capacity', async () => {
    const processed = new InMemoryProcessedEventIds({ capacity: 2 });
    expect(await processed.firstSeen('1')).toBe(true);
    expect(await processed.firstSeen('2')).toBe(true);
    expect(await processed.firstSeen('3')).toBe(true);

    expect(await processed.firstSeen('2')).toBe(false);
    expect(await processed.firstSeen('3')).toBe(false);
    expect(await processed.firstSeen('1')).toBe(true);
  });

  it('rejects a capacity that is not a positive integer', () => {
    expect(() => new InMemoryProcessedEventIds({ capacity: 0 })).toThrow(RangeError);
  });
});
