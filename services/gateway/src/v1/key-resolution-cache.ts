import { hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

/** An active API key as a `/v1` call needs it. */
export interface ResolvedApiKey {
  readonly keyId: string;
  /** `svc_` and seven characters: safe to log. */
  readonly prefix: string;
  /** The wallet that owns the key and pays its calls. */
  readonly wallet: string;
  readonly spendCapWei: bigint | null;
}

/** Looks a presented key up at its source (the key-service); undefined for a key that does not work. */
export type KeyLookup = (presentedKey: string) => Promise<ResolvedApiKey | undefined>;

export interface KeyResolutionCacheSettings {
  /** Most keys held; 0 disables the cache (every call resolves at the source). */
  readonly maxEntries: number;
  readonly ttlMs: number;
  /**
   * Whether key events reach the cache now (its eviction feed is live). While false the cache holds
   * nothing and every call resolves at the source, so a key change applies at once even when no event
   * can say so. Default: always (no feed; entries live out their TTL).
   */
  readonly evictionsHeard?: () => boolean;
}

// Entries are keyed by a hash of the key, so the cache's keys are not the bearer secrets themselves.
function cacheKeyOf(presentedKey: string): string {
  return hash('sha256', presentedKey, 'base64url');
}

/**
 * Resolved keys of this replica: a bounded LRU with a short TTL, concurrent misses of one key sharing one
 * lookup. Only working keys are cached. The cache never decides that a key still works on its own: callers
 * check the shared revocation marker on every call, and key events evict entries early; while those
 * events cannot be heard, the cache is off.
 */
export class KeyResolutionCache {
  readonly #lookup: KeyLookup;
  readonly #entries: LRUCache<string, ResolvedApiKey> | undefined;
  readonly #cacheKeyByKeyId = new Map<string, string>();
  readonly #inFlight = new Map<string, Promise<ResolvedApiKey | undefined>>();
  readonly #evictionsHeard: () => boolean;
  // Bumped by every eviction: a lookup that started before one may carry what the eviction removed.
  #evictions = 0;

  constructor(lookup: KeyLookup, settings: KeyResolutionCacheSettings) {
    this.#lookup = lookup;
    this.#evictionsHeard = settings.evictionsHeard ?? (() => true);
    if (settings.maxEntries > 0) {
      this.#entries = new LRUCache<string, ResolvedApiKey>({
        max: settings.maxEntries,
        ttl: settings.ttlMs,
        dispose: (key, cacheKey) => {
          if (this.#cacheKeyByKeyId.get(key.keyId) === cacheKey) this.#cacheKeyByKeyId.delete(key.keyId);
        },
      });
    }
  }

  /** The cached resolution of a key, without asking the source. */
  cached(presentedKey: string): ResolvedApiKey | undefined {
    if (!this.#trusted()) return undefined;
    return this.#entries?.get(cacheKeyOf(presentedKey));
  }

  /** The key from the cache, else from the source (one lookup however many callers miss at once). */
  async resolve(presentedKey: string): Promise<ResolvedApiKey | undefined> {
    // Disabled (or distrusted) means off: no sharing of in-flight lookups either, every call asks the source.
    if (this.#entries === undefined || !this.#trusted()) return this.#lookup(presentedKey);
    const cacheKey = cacheKeyOf(presentedKey);
    const cached = this.#entries.get(cacheKey);
    if (cached !== undefined) return cached;
    let pending = this.#inFlight.get(cacheKey);
    if (pending === undefined) {
      pending = this.#lookUp(presentedKey, cacheKey);
      this.#inFlight.set(cacheKey, pending);
    }
    return pending;
  }

  /** Drops a key (revoked, deleted or changed). */
  evict(keyId: string): void {
    this.#evictions += 1;
    const cacheKey = this.#cacheKeyByKeyId.get(keyId);
    if (cacheKey !== undefined) this.#entries?.delete(cacheKey);
  }

  get size(): number {
    return this.#entries?.size ?? 0;
  }

  /**
   * Whether entries may be used now. While evictions are not heard, it empties the cache and counts as
   * an eviction, so nothing cached before (or by a lookup still running) outlives the gap.
   */
  #trusted(): boolean {
    if (this.#evictionsHeard()) return true;
    this.#evictions += 1;
    if (this.#entries?.size) {
      this.#entries.clear();
      this.#cacheKeyByKeyId.clear();
    }
    return false;
  }

  async #lookUp(presentedKey: string, cacheKey: string): Promise<ResolvedApiKey | undefined> {
    const evictionsBefore = this.#evictions;
    try {
      const key = await this.#lookup(presentedKey);
      if (key !== undefined && this.#evictions === evictionsBefore && this.#trusted()) {
        this.#entries?.set(cacheKey, key);
        this.#cacheKeyByKeyId.set(key.keyId, cacheKey);
      }
      return key;
    } finally {
      this.#inFlight.delete(cacheKey);
    }
  }
}
