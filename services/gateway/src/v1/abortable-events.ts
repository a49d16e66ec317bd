/** The client went away before its call ended. */
export class ClientGoneError extends Error {
  override readonly name = 'ClientGoneError';
  constructor() {
    super('the client closed the connection');
  }
}

/**
 * The events of `source` until `signal` aborts, then ClientGoneError at once, even while the source is
 * stuck waiting: a backend that ignores the signal must not keep the call (and its slot) alive.
 */
export async function* untilAborted<T>(source: AsyncIterable<T>, signal: AbortSignal): AsyncGenerator<T> {
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
    // Not awaited: a source suspended in a pending `next` would hold the caller until it answers.
    if (!finished) Promise.resolve(iterator.return?.()).catch(() => undefined);
  }
}
