import { randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import type { Frame, FrameCursor, Store } from '../../../src/store/index.js';
import { concurrently, sleep, uniqueKey, type UseFixture } from './fixture.js';

const ALL_BYTE_VALUES = Uint8Array.from({ length: 256 }, (_, i) => i);

function bytes(text: string): Uint8Array {
  return new TextEncoder().encode(text);
}

function cursorOrder(a: FrameCursor, b: FrameCursor): number {
  const [aMs = 0n, aSeq = 0n] = a.split('-').map(BigInt);
  const [bMs = 0n, bSeq = 0n] = b.split('-').map(BigInt);
  return aMs === bMs ? Number(aSeq - bSeq) : Number(aMs - bMs);
}

/** Reads a stream to its end page by page, the way a relay catches up. */
async function readAll(store: Store, streamKey: string): Promise<Frame[]> {
  const frames: Frame[] = [];
  for (;;) {
    const page = await store.frames.read(streamKey, frames.at(-1)?.cursor ?? null, { count: 3 });
    if (page.length === 0) return frames;
    frames.push(...page);
  }
}

export function frameStreamsContract(use: UseFixture): void {
  describe('frames', () => {
    it('returns appended frames in order with their dedup ids and exact bytes', async () => {
      const [first, second] = use().replicas;
      const stream = uniqueKey('job');
      const payloads = [ALL_BYTE_VALUES, new Uint8Array(0), randomBytes(64 * 1024), bytes('{"delta":"hé"}')];
      const appended = [];
      for (const [seq, payload] of payloads.entries()) {
        appended.push(await first.frames.append(stream, `1:${seq}`, payload));
      }
      expect(appended.every((a) => a.appended)).toBe(true);

      const frames = await second.frames.read(stream, null);
      expect(frames.map((f) => f.dedupId)).toEqual(['1:0', '1:1', '1:2', '1:3']);
      expect(frames.map((f) => f.cursor)).toEqual(appended.map((a) => a.cursor));
      frames.forEach((frame, i) =>
        expect(Buffer.from(frame.payload).equals(Buffer.from(payloads[i]!))).toBe(true),
      );
    });

    it('appends a dedup id once: a re-sent frame keeps the first payload and cursor', async () => {
      const [first, second] = use().replicas;
      const stream = uniqueKey('job');
      const original = await first.frames.append(stream, '1:0', bytes('first'));
      const resent = await second.frames.append(stream, '1:0', bytes('resent'));
      expect(resent).toEqual({ appended: false, cursor: original.cursor });
      const frames = await first.frames.read(stream, null);
      expect(frames).toHaveLength(1);
      expect(new TextDecoder().decode(frames[0]?.payload)).toBe('first');
    });

    it('appends exactly one of 20 concurrent appends of one dedup id across replicas', async () => {
      const { replicas } = use();
      const stream = uniqueKey('job');
      const results = await concurrently(replicas, 20, (store, i) =>
        store.frames.append(stream, '2:5', bytes(`copy ${i}`)),
      );
      expect(results.filter((r) => r.appended)).toHaveLength(1);
      expect(new Set(results.map((r) => r.cursor)).size).toBe(1);
      expect(await replicas[0].frames.read(stream, null)).toHaveLength(1);
    });

    it('keeps every one of 100 concurrent appends, in one strictly increasing order', async () => {
      const { replicas } = use();
      const stream = uniqueKey('job');
      await concurrently(replicas, 100, (store, i) =>
        store.frames.append(stream, `1:${i}`, bytes(String(i))),
      );
      const frames = await readAll(replicas[1], stream);
      expect(new Set(frames.map((f) => f.dedupId)).size).toBe(100);
      const cursors = frames.map((f) => f.cursor);
      expect([...cursors].sort(cursorOrder)).toEqual(cursors);
      expect(new Set(cursors).size).toBe(100);
    });

    it('reads only what follows a cursor, at most `count` at a time', async () => {
      const [first, second] = use().replicas;
      const stream = uniqueKey('job');
      const cursors = [];
      for (let seq = 0; seq < 7; seq++)
        cursors.push((await first.frames.append(stream, `1:${seq}`, bytes('x'))).cursor);
      const page = await second.frames.read(stream, cursors[2]!, { count: 2 });
      expect(page.map((f) => f.dedupId)).toEqual(['1:3', '1:4']);
      expect(await second.frames.read(stream, cursors[6]!)).toEqual([]);
      expect((await readAll(second, stream)).map((f) => f.dedupId)).toEqual(
        Array.from({ length: 7 }, (_, seq) => `1:${seq}`),
      );
    });

    it('gives a reader that subscribes late every frame from the start', async () => {
      const [first, second] = use().replicas;
      const stream = uniqueKey('job');
      for (let seq = 0; seq < 5; seq++) await first.frames.append(stream, `1:${seq}`, bytes(`chunk ${seq}`));
      await first.frames.append(stream, '1:5', bytes('final'));
      const frames = await second.frames.read(stream, null, { blockMs: 5_000 });
      expect(frames.map((f) => new TextDecoder().decode(f.payload))).toEqual([
        'chunk 0',
        'chunk 1',
        'chunk 2',
        'chunk 3',
        'chunk 4',
        'final',
      ]);
    });

    it('wakes a blocked read when another replica appends', async () => {
      const [first, second] = use().replicas;
      const stream = uniqueKey('job');
      const reading = first.frames.read(stream, null, { blockMs: 10_000 });
      await sleep(100);
      await second.frames.append(stream, '1:0', bytes('hello'));
      const frames = await reading;
      expect(frames.map((f) => f.dedupId)).toEqual(['1:0']);
    });

    it('ends a blocked read with no frames when nothing arrives in time', async () => {
      const [store] = use().replicas;
      expect(await store.frames.read(uniqueKey('job'), null, { blockMs: 200 })).toEqual([]);
    });

    it('relays a live stream to a tailing reader without gaps or repeats', async () => {
      const [writer, reader] = use().replicas;
      const stream = uniqueKey('job');
      const received: string[] = [];
      const tail = (async () => {
        let cursor: FrameCursor | null = null;
        while (received.at(-1) !== 'final') {
          const page = await reader.frames.read(stream, cursor, { blockMs: 5_000, count: 4 });
          for (const frame of page) received.push(new TextDecoder().decode(frame.payload));
          cursor = page.at(-1)?.cursor ?? cursor;
        }
      })();
      const sent = Array.from({ length: 30 }, (_, i) => `delta ${i}`);
      for (const [seq, text] of sent.entries()) {
        await writer.frames.append(stream, `1:${seq}`, bytes(text));
        if (seq % 7 === 0) await sleep(20);
      }
      await writer.frames.append(stream, '1:30', bytes('final'));
      await tail;
      expect(received).toEqual([...sent, 'final']);
    });

    it('wakes 40 readers blocked on 40 streams at once', async () => {
      const [first, second] = use().replicas;
      const streams = Array.from({ length: 40 }, () => uniqueKey('job'));
      const readers = streams.map((stream) => first.frames.read(stream, null, { blockMs: 15_000 }));
      await sleep(100);
      await Promise.all(streams.map((stream) => second.frames.append(stream, '1:0', bytes(stream))));
      const results = await Promise.all(readers);
      results.forEach((frames, i) => {
        expect(frames).toHaveLength(1);
        expect(new TextDecoder().decode(frames[0]?.payload)).toBe(streams[i]);
      });
    });

    it('drops a stream and its dedup ids when it expires', async () => {
      const [first, second] = use().replicas;
      const stream = uniqueKey('job');
      expect(await first.frames.expire(stream, 1_000)).toBe(false);
      await first.frames.append(stream, '1:0', bytes('x'));
      expect(await second.frames.expire(stream, 250)).toBe(true);
      await first.frames.append(stream, '1:1', bytes('y'));
      expect(await second.frames.read(stream, null)).toHaveLength(2);
      await sleep(350);
      expect(await second.frames.read(stream, null)).toEqual([]);
      expect((await first.frames.append(stream, '1:0', bytes('z'))).appended).toBe(true);
    });

    it('rejects a cursor that no read or append produced', async () => {
      const [store] = use().replicas;
      await expect(store.frames.read(uniqueKey('job'), 'not-a-cursor')).rejects.toThrow(RangeError);
      await expect(store.frames.read(uniqueKey('job'), null, { count: 0 })).rejects.toThrow(RangeError);
    });
  });
}
