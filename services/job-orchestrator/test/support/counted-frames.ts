import type { FrameAppendResult, FrameStreams, Store } from '@svc/platform';

/** The store's real frame streams, counting the appends asked for per dedup id (how often a frame came). */
export class CountedFrames implements FrameStreams {
  readonly appends = new Map<string, number>();
  readonly #frames: FrameStreams;

  constructor(frames: FrameStreams) {
    this.#frames = frames;
  }

  append(streamKey: string, dedupId: string, payload: Uint8Array): Promise<FrameAppendResult> {
    this.appends.set(dedupId, (this.appends.get(dedupId) ?? 0) + 1);
    return this.#frames.append(streamKey, dedupId, payload);
  }

  read: FrameStreams['read'] = (...args) => this.#frames.read(...args);
  expire: FrameStreams['expire'] = (...args) => this.#frames.expire(...args);
}

/** `store` with its frame streams counted. */
export function withCountedFrames(store: Store): { store: Store; counted: CountedFrames } {
  const counted = new CountedFrames(store.frames);
  return { store: Object.assign(Object.create(store) as Store, { frames: counted }), counted };
}
