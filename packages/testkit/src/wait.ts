import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitOptions {
  /** What is awaited, for the failure: `timed out waiting for <what>`. */
  what: string;
  /** How long to keep probing (default 10 s). It only turns a hang into a named failure. */
  timeoutMs?: number;
  /** Pause between probes (default 25 ms). */
  intervalMs?: number;
}

/**
 * Calls `probe` until it returns a value other than undefined, and resolves with that value. A probe
 * that throws fails the wait at once; one that never answers fails it with
 * `timed out waiting for <what>` after `timeoutMs`.
 */
export async function waitFor<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  { what, timeoutMs = 10_000, intervalMs = 25 }: WaitOptions,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/**
 * `waitFor` for a reading and a test of it: resolves with the first value `read` returns that
 * `done` accepts (undefined included).
 */
export async function waitUntil<T>(
  read: () => T | Promise<T>,
  done: (value: T) => boolean,
  options: WaitOptions,
): Promise<T> {
  const accepted = await waitFor(async () => {
    const value = await read();
    return done(value) ? { value } : undefined;
  }, options);
  return accepted.value;
}
