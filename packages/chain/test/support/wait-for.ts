/**
 * Polls `probe` until it returns a value other than undefined. The limit only turns a hang into a
 * failure with a name; no assertion depends on how long the wait took.
 */
export async function waitFor<T>(
  probe: () => Promise<T | undefined>,
  what: string,
  { intervalMs = 25, timeoutMs = 10_000 }: { intervalMs?: number; timeoutMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
