import type { SignInResultJson } from '@svc/api';

// sessionStorage, never localStorage: the token lives as long as the tab, survives a reload, and is never
// shared with other tabs or left on disk after the browser closes.
const STORAGE_KEY = 'svc.console.sign-in';

/** A sign-in the console holds: the token, its expiry, the address it speaks for and the wallet that signed. */
export interface SignInSession {
  readonly token: string;
  readonly address: string;
  /** The browser wallet that signed (InjectedWallet.id): reads and deposits go through it alone. */
  readonly walletId: string;
  /** Milliseconds since the epoch. */
  readonly expiresAt: number;
}

/**
 * The session a verified token opens, its expiry on this machine's clock: the token's own lifetime
 * (`exp` − `iat`) from the moment it arrived. A browser whose clock is off from the server's still counts
 * down the hour the server gave, instead of signing out at once or never.
 */
export function sessionOf(token: SignInResultJson, walletId: string, receivedAt = Date.now()): SignInSession {
  const lifetimeMs = lifetimeOf(token.token);
  const expiresAt = lifetimeMs === undefined ? Date.parse(token.expiresAt) : receivedAt + lifetimeMs;
  return { token: token.token, address: token.address, walletId, expiresAt };
}

/** `exp` − `iat` of a compact JWT, in milliseconds; undefined when it does not say. Not a verification. */
function lifetimeOf(jwt: string): number | undefined {
  try {
    const payload = jwt.split('.')[1]!.replace(/-/g, '+').replace(/_/g, '/');
    const claims = JSON.parse(atob(payload)) as { iat?: unknown; exp?: unknown };
    if (typeof claims.iat !== 'number' || typeof claims.exp !== 'number' || claims.exp <= claims.iat)
      return undefined;
    return (claims.exp - claims.iat) * 1000;
  } catch {
    return undefined;
  }
}

export function isLapsed(session: SignInSession, now = Date.now()): boolean {
  return now >= session.expiresAt;
}

export function saveSession(session: SignInSession | undefined): void {
  try {
    if (session) sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
    else sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // Storage refused (a private window's quota): the session lives in memory only.
  }
}

/** The tab's sign-in, if one was saved and has not lapsed. */
export function restoreSession(now = Date.now()): SignInSession | undefined {
  try {
    const saved = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? 'null') as Partial<SignInSession> | null;
    if (
      typeof saved?.token !== 'string' ||
      typeof saved.address !== 'string' ||
      typeof saved.walletId !== 'string' ||
      typeof saved.expiresAt !== 'number'
    )
      return undefined;
    const session = saved as SignInSession;
    return isLapsed(session, now) ? undefined : session;
  } catch {
    return undefined;
  }
}

/** "in 59 min", "in 40 s": how long the sign-in has left. */
export function timeLeft(session: SignInSession, now = Date.now()): string {
  const seconds = Math.max(0, Math.floor((session.expiresAt - now) / 1000));
  if (seconds >= 120) return `in ${Math.floor(seconds / 60)} min`;
  return `in ${seconds} s`;
}
