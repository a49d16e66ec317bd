/**
 * Waits for `work`, but at most `timeoutMs`: true when it fulfilled in time, false when the time ran out
 * first (the work goes on; a later rejection of it is handled here, never left unhandled). A rejection in
 * time rejects. The one timer race for drains, stops and deadlines.
 */
export async function waitAtMost(work: Promise<unknown>, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, timeoutMs));
  });
  try {
    return await Promise.race([work.then(() => true as const), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A point in time several steps share: each step gets what is left of it. */
export class Deadline {
  readonly #at: number;

  constructor(timeoutMs: number) {
    this.#at = Date.now() + timeoutMs;
  }

  /** Milliseconds left, 0 once passed. */
  get remainingMs(): number {
    return Math.max(0, this.#at - Date.now());
  }
}
