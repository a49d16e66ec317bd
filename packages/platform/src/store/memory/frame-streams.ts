import { StoreClosedError } from '../errors.js';
import type { Frame, FrameAppendResult, FrameCursor, FrameReadOptions, FrameStreams } from '../store.js';
import {
  requireFrameCursor,
  requireKey,
  requireNonNegativeInteger,
  requirePositiveInteger,
} from '../validation.js';
import { ExpiringMap, type MemoryContext } from './memory-context.js';

const DEFAULT_READ_COUNT = 100;

interface StoredFrame {
  readonly ms: number;
  readonly seq: number;
  readonly dedupId: string;
  readonly payload: Uint8Array;
}

interface FrameStream {
  readonly frames: StoredFrame[];
  readonly cursorsByDedupId: Map<string, FrameCursor>;
}

interface BlockedReader {
  /** Called after every append to the stream. */
  readonly wake: () => void;
  readonly fail: (error: Error) => void;
}

/** Frames keep Redis-style `<ms>-<seq>` cursors, so cursors look and order the same on both stores. */
export class MemoryFrameStreams implements FrameStreams {
  readonly #streams = new ExpiringMap<FrameStream>();
  readonly #blockedReaders = new Map<string, Set<BlockedReader>>();

  constructor(private readonly context: MemoryContext) {}

  async append(streamKey: string, dedupId: string, payload: Uint8Array): Promise<FrameAppendResult> {
    requireKey('streamKey', streamKey);
    requireKey('dedupId', dedupId);
    this.context.assertOpen('frames.append');
    const now = this.context.now();
    const entry = this.#streams.entry(streamKey, now);
    const stream = entry?.value ?? { frames: [], cursorsByDedupId: new Map<string, FrameCursor>() };
    const existing = stream.cursorsByDedupId.get(dedupId);
    if (existing !== undefined) return { appended: false, cursor: existing };

    const last = stream.frames[stream.frames.length - 1];
    const ms = Math.max(now, last?.ms ?? 0);
    const seq = last !== undefined && last.ms === ms ? last.seq + 1 : 0;
    stream.frames.push({ ms, seq, dedupId, payload: Uint8Array.from(payload) });
    const cursor = `${ms}-${seq}`;
    stream.cursorsByDedupId.set(dedupId, cursor);
    this.#streams.set(streamKey, stream, entry?.expiresAtMs ?? null);
    this.#wakeReaders(streamKey);
    return { appended: true, cursor };
  }

  async read(streamKey: string, after: FrameCursor | null, options: FrameReadOptions = {}): Promise<Frame[]> {
    requireKey('streamKey', streamKey);
    if (after !== null) requireFrameCursor(after);
    const blockMs = options.blockMs ?? 0;
    const count = options.count ?? DEFAULT_READ_COUNT;
    requireNonNegativeInteger('blockMs', blockMs);
    requirePositiveInteger('count', count);
    this.context.assertOpen('frames.read');
    const position = parseCursor(after ?? '0-0');
    const ready = this.#framesAfter(streamKey, position, count);
    if (ready.length > 0 || blockMs === 0) return ready;
    return this.#waitForFrames(streamKey, position, count, blockMs);
  }

  async expire(streamKey: string, ttlMs: number): Promise<boolean> {
    requireKey('streamKey', streamKey);
    requirePositiveInteger('ttlMs', ttlMs);
    this.context.assertOpen('frames.expire');
    const now = this.context.now();
    const stream = this.#streams.get(streamKey, now);
    if (stream === undefined) return false;
    this.#streams.set(streamKey, stream, now + ttlMs);
    return true;
  }

  sweep(now: number): void {
    this.#streams.sweep(now);
  }

  /** Blocked reads end with StoreClosedError, as a Redis read does when its connection is dropped. */
  close(): void {
    for (const readers of this.#blockedReaders.values()) {
      for (const reader of readers) reader.fail(new StoreClosedError('frames.read'));
    }
    this.#blockedReaders.clear();
  }

  #framesAfter(streamKey: string, position: readonly [bigint, bigint], count: number): Frame[] {
    const stream = this.#streams.get(streamKey, this.context.now());
    if (stream === undefined) return [];
    const [afterMs, afterSeq] = position;
    const frames: Frame[] = [];
    for (const frame of stream.frames) {
      const ms = BigInt(frame.ms);
      if (ms < afterMs || (ms === afterMs && BigInt(frame.seq) <= afterSeq)) continue;
      frames.push({
        cursor: `${frame.ms}-${frame.seq}`,
        dedupId: frame.dedupId,
        payload: Uint8Array.from(frame.payload),
      });
      if (frames.length === count) break;
    }
    return frames;
  }

  #waitForFrames(
    streamKey: string,
    position: readonly [bigint, bigint],
    count: number,
    blockMs: number,
  ): Promise<Frame[]> {
    return new Promise<Frame[]>((resolve, reject) => {
      const readers = this.#blockedReaders.get(streamKey) ?? new Set<BlockedReader>();
      this.#blockedReaders.set(streamKey, readers);
      const stopWaiting = () => {
        clearTimeout(timer);
        readers.delete(reader);
        if (readers.size === 0 && this.#blockedReaders.get(streamKey) === readers) {
          this.#blockedReaders.delete(streamKey);
        }
      };
      const reader: BlockedReader = {
        wake: () => {
          const frames = this.#framesAfter(streamKey, position, count);
          if (frames.length === 0) return;
          stopWaiting();
          resolve(frames);
        },
        fail: (error) => {
          stopWaiting();
          reject(error);
        },
      };
      const timer = setTimeout(() => {
        stopWaiting();
        resolve([]);
      }, blockMs);
      readers.add(reader);
    });
  }

  #wakeReaders(streamKey: string): void {
    const readers = this.#blockedReaders.get(streamKey);
    if (readers === undefined) return;
    for (const reader of [...readers]) reader.wake();
  }
}

function parseCursor(cursor: FrameCursor): [bigint, bigint] {
  const [ms, seq] = cursor.split('-');
  return [BigInt(ms ?? '0'), BigInt(seq ?? '0')];
}
