/** A renewal started by {@link renewWhileHeld}. */
export interface Renewal {
  stop(): void;
}

/**
 * Renews what a live holder keeps in the store (a lock, a lease) every third of its TTL until stopped, so
 * it lasts as long as its holder and lapses within `ttlMs` of the holder dying (SIGKILL, a lost node)
 * instead of at the longest it could ever be needed. A renewal that fails is left to the next one; the
 * timer never keeps the process alive.
 */
export function renewWhileHeld(ttlMs: number, renew: () => Promise<unknown>): Renewal {
  const timer = setInterval(
    () => {
      renew().catch(() => undefined);
    },
    Math.max(1, Math.floor(ttlMs / 3)),
  );
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
