/**
 * A push-driven async iterable: producers `push` as events happen, one consumer iterates.
 * Used to feed client and bidi streams (a worker link sends when work happens, not from a generator).
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly buffered: T[] = [];
  private waiting: ((result: IteratorResult<T>) => void) | undefined;
  private failWaiting: ((error: unknown) => void) | undefined;
  private ended = false;
  private failure: { error: unknown } | undefined;

  push(value: T): void {
    if (this.ended) throw new Error('push after end');
    if (this.waiting) {
      const resolve = this.waiting;
      this.clearWaiter();
      resolve({ value, done: false });
    } else {
      this.buffered.push(value);
    }
  }

  /** Ends the stream after the values already pushed. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.waiting && this.buffered.length === 0) {
      const resolve = this.waiting;
      this.clearWaiter();
      resolve({ value: undefined, done: true });
    }
  }

  /** Ends the stream with an error, delivered after the values already pushed. */
  fail(error: unknown): void {
    if (this.ended) return;
    this.failure = { error };
    this.ended = true;
    if (this.failWaiting && this.buffered.length === 0) {
      const reject = this.failWaiting;
      this.clearWaiter();
      reject(error);
    }
  }

  get isEnded(): boolean {
    return this.ended;
  }

  get size(): number {
    return this.buffered.length;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        if (this.buffered.length > 0)
          return Promise.resolve({ value: this.buffered.shift() as T, done: false });
        if (this.failure) return Promise.reject(this.failure.error);
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise<IteratorResult<T>>((resolve, reject) => {
          this.waiting = resolve;
          this.failWaiting = reject;
        });
      },
      return: () => {
        this.ended = true;
        this.buffered.length = 0;
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }

  private clearWaiter(): void {
    this.waiting = undefined;
    this.failWaiting = undefined;
  }
}
