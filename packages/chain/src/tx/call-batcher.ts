/** When calls close into a batch: one transaction (JobRegistry's `batch`, docs/protocol.md, Batches). */
export interface BatchPolicy {
  /**
   * How long a batch stays open for more jobs when no batch is being prepared ahead of it (and
   * `mayLinger` allows it). 0: it closes at once (after the current tick), so a call waits for nobody.
   */
  readonly lingerMs: number;
  /**
   * Asked when a batch would linger: whether enough other work is under way that more requests are
   * likely within the linger (the job-orchestrator: other calls waiting for their answers, like
   * PostgreSQL's `commit_siblings`). Without it, a batch always lingers.
   */
  readonly mayLinger?: () => boolean;
  /** No call waits longer for its batch to close, even while the batch ahead is still being sent. */
  readonly maxWaitMs: number;
  /** Calls in one batch at most. */
  readonly maxCalls: number;
}

/** One request in a batch, with the callbacks that tell its caller how the batch went for it. */
export interface BatchEntry<R, T> {
  readonly request: R;
  resolve(value: T): void;
  reject(error: unknown): void;
}

/**
 * Group commit for calls that share a transaction: requests arriving while a batch is being sent wait for
 * it and then close together into the next one, so under load each transaction carries many calls, and
 * on an idle service a request closes into a batch of its own at once. A batch also closes when the next
 * request would not fit (`capacity`, in whatever `sizeOf` counts: a blob's framed bytes) or it reaches
 * `maxCalls`; no request waits longer than `maxWaitMs`. `dispatch` sends one batch and settles when the
 * next may go (the job-orchestrator's submissions: once signed; a worker's commitments: once mined).
 */
export class CallBatcher<R, T> {
  readonly #policy: BatchPolicy;
  readonly #sizeOf: (request: R) => number;
  readonly #capacity: number;
  readonly #dispatch: (entries: BatchEntry<R, T>[]) => Promise<void>;
  #open: BatchEntry<R, T>[] = [];
  #openBytes = 0;
  /** When the first request of the open batch arrived. */
  #openedAt = 0;
  #timer: NodeJS.Timeout | undefined;
  /** Batches closed whose dispatch has not settled. */
  #ahead = 0;

  constructor(
    policy: BatchPolicy,
    sizeOf: (request: R) => number,
    capacity: number,
    dispatch: (entries: BatchEntry<R, T>[]) => Promise<void>,
  ) {
    if (policy.maxCalls < 1 || policy.lingerMs > policy.maxWaitMs) {
      throw new RangeError('a batch takes at least one call, and lingers no longer than maxWaitMs');
    }
    this.#policy = policy;
    this.#sizeOf = sizeOf;
    this.#capacity = capacity;
    this.#dispatch = dispatch;
  }

  add(request: R): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const size = this.#sizeOf(request);
      if (size > this.#capacity) {
        reject(new RangeError(`a request of ${size} bytes does not fit a batch of ${this.#capacity}`));
        return;
      }
      if (this.#open.length > 0 && this.#openBytes + size > this.#capacity) this.#close();
      if (this.#open.length === 0) this.#openedAt = Date.now();
      this.#open.push({ request, resolve, reject });
      this.#openBytes += size;
      if (this.#open.length >= this.#policy.maxCalls) this.#close();
      else this.#schedule();
    });
  }

  /** Arms the one timer that closes the open batch: after the linger when nothing is ahead (none when
   * `mayLinger` says no), else at the latest after maxWaitMs (a batch ahead that is signed first closes it
   * earlier, see #close). */
  #schedule(): void {
    if (this.#open.length === 0) return;
    const { lingerMs, maxWaitMs, mayLinger } = this.#policy;
    const linger = lingerMs > 0 && (mayLinger?.() ?? true) ? lingerMs : 0;
    const limit = this.#ahead === 0 ? linger : maxWaitMs;
    const left = Math.max(0, this.#openedAt + limit - Date.now());
    clearTimeout(this.#timer);
    // Not unref'd: a process whose only work is a request waiting here (a worker committing saved answers
    // at start-up) must not exit under it.
    this.#timer = setTimeout(() => this.#close(), left);
  }

  #close(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const entries = this.#open;
    if (entries.length === 0) return;
    this.#open = [];
    this.#openBytes = 0;
    this.#ahead += 1;
    const told = this.#dispatch(entries).catch((error: unknown) => {
      for (const entry of entries) entry.reject(error);
    });
    void told.finally(() => {
      this.#ahead -= 1;
      this.#schedule();
    });
  }
}
