import type { FrameAppendResult, FrameStreams, Store } from '@svc/platform';

/**
 * The store's real frame streams, losing the appends a test picks (as if the link that carried a delta
 * broke before the frame was stored): the relay then sees a gap in `seq`.
 */
export class DroppingFrames implements FrameStreams {
  /** Appends whose dedup id matches are lost; none while undefined. */
  drop: ((dedupId: string) => boolean) | undefined;
  readonly dropped: string[] = [];
  readonly #frames: FrameStreams;

  constructor(frames: FrameStreams) {
    this.#frames = frames;
  }

  async append(streamKey: string, dedupId: string, payload: Uint8Array): Promise<FrameAppendResult> {
    if (this.drop?.(dedupId)) {
      this.dropped.push(dedupId);
      return { appended: true, cursor: '0-0' };
    }
    return this.#frames.append(streamKey, dedupId, payload);
  }

  read: FrameStreams['read'] = (...args) => this.#frames.read(...args);
  expire: FrameStreams['expire'] = (...args) => this.#frames.expire(...args);
}

/** `store` with frame appends that a test can make lose. */
export function withDroppingFrames(store: Store): { store: Store; frames: DroppingFrames } {
  const frames = new DroppingFrames(store.frames);
  return { store: Object.assign(Object.create(store) as Store, { frames }), frames };
}
