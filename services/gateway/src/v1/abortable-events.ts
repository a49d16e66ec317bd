/** The client went away before its call ended. */
export class ClientGoneError extends Error {
  override readonly name = 'ClientGoneError';
  constructor() {
    super('the client closed the connection');
  }
}

/** What becomes of a source's rest once its reader stopped early. */
export type Abandon<T> = (rest: AsyncIterator<T>) => void;

/** Closes the rest; not awaited: a source suspended in a pending `next` would hold the caller. */
export function closeQuietly<T>(rest: AsyncIterator<T>): void {
  Promise.resolve(rest.return?.()).catch(() => undefined);
}

/**
 * Reads the rest in the background until it ends or `timeoutMs` passed, then closes it: the source's
 * own observers (upstream of the reader) still hear how it ended, although nobody waits for it.
 */
export function drainFor<T>(timeoutMs: number): Abandon<T> {
  return (rest) => {
    const deadline = new Promise<'timeout'>((resolve) => setTimeout(resolve, timeoutMs, 'timeout').unref());
    void (async () => {
      for (;;) {
        const next = await Promise.race([rest.next(), deadline]);
        if (next === 'timeout') return closeQuietly(rest);
        if (next.done) return;
      }
    })().catch(() => undefined);
  };
}

/**
 * The events of `source` until `signal` aborts, then ClientGoneError at once, even while the source is
 * stuck waiting: a backend that ignores the signal must not keep the call (and its slot) alive. What is
 * left of the source then goes to `abandon` (closed by default).
 */
export async function* untilAborted<T>(
  source: AsyncIterable<T>,
  signal: AbortSignal,
  abandon: Abandon<T> = closeQuietly,
): AsyncGenerator<T> {
  const iterator = source[Symbol.asyncIterator]();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => reject(new ClientGoneError());
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  let finished = false;
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), aborted]);
      if (next.done) {
        finished = true;
        return;
      }
      yield next.value;
    }
  } finally {
    if (onAbort) signal.removeEventListener('abort', onAbort);
    if (!finished) abandon(iterator);
  }
}
