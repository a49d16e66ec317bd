// Every Redis key this store writes, in one place, under the store's namespace. Keys that one operation
// touches together share a hash tag (`{…}`: Redis Cluster hashes only the tag), so every operation's keys
// are in one slot and the layout holds on a Redis Cluster as on one server. Single-key primitives (rate
// windows, leases, locks, values, counters, nonces) add no tag of their own: their names stayed as they
// were, so an upgrade keeps them. A caller may put a tag in such a key itself to place it next to another
// (the gateway tags a key's rate window with the key id, the tag of its revocation marker).

/** The part of a Redis key a cluster hashes: the first `{…}` holding something, else the whole key. */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{');
  if (open < 0) return key;
  const close = key.indexOf('}', open + 1);
  return close <= open + 1 ? key : key.slice(open + 1, close);
}

export class RedisKeyspace {
  constructor(readonly namespace: string) {
    // A tag in the namespace would be the tag of every key, putting the whole store in one slot.
    if (/[{}]/.test(namespace)) throw new RangeError(`namespace must not contain { or }, got ${namespace}`);
  }

  /** Whether two keys are in the same slot because they share a hash tag. */
  static sameSlot(a: string, b: string): boolean {
    return hashTagOf(a) === hashTagOf(b);
  }

  rateWindow(key: string): string {
    return `${this.namespace}:rate:${key}`;
  }

  concurrencyLeases(key: string): string {
    return `${this.namespace}:leases:${key}`;
  }

  lock(key: string): string {
    return `${this.namespace}:lock:${key}`;
  }

  value(key: string): string {
    return `${this.namespace}:value:${key}`;
  }

  counters(key: string): string {
    return `${this.namespace}:counters:${key}`;
  }

  tallyOpen(tally: string): string {
    return `${this.namespace}:tally:{${tally}}:open`;
  }

  tallySealed(tally: string): string {
    return `${this.namespace}:tally:{${tally}}:sealed`;
  }

  tallyBatchId(tally: string): string {
    return `${this.namespace}:tally:{${tally}}:batch`;
  }

  tallyClaim(tally: string): string {
    return `${this.namespace}:tally:{${tally}}:claim`;
  }

  frameStream(streamKey: string): string {
    return `${this.namespace}:frames:{${streamKey}}`;
  }

  frameDedupIds(streamKey: string): string {
    return `${this.namespace}:frames:{${streamKey}}:dedup`;
  }

  queue(queue: string): string {
    return `${this.namespace}:queue:{${queue}}`;
  }

  presenceExpiries(group: string): string {
    return `${this.namespace}:presence:{${group}}:expiries`;
  }

  presenceValues(group: string): string {
    return `${this.namespace}:presence:{${group}}:values`;
  }

  nonce(account: string): string {
    return `${this.namespace}:nonce:${account}`;
  }

  /** A pub/sub channel, not a key: named like one so namespaces keep their messages apart. */
  channel(channel: string): string {
    return `${this.namespace}:channel:${channel}`;
  }

  /** One store's own channel of subscription markers (see RedisChannels). */
  channelMarkers(storeId: string): string {
    return `${this.namespace}:channel-marker:${storeId}`;
  }

  /** Set when `id` is revoked: a key per id, so markers spread over a cluster's slots. */
  revocationMarker(id: string): string {
    return `${this.namespace}:revoked:{${id}}`;
  }

  /**
   * The one set of revoked ids that releases before per-id markers wrote. On a single server it is still
   * written and read with the markers, so replicas of the two releases agree during a rolling upgrade; a
   * cluster never had it.
   */
  legacyRevocations(): string {
    return `${this.namespace}:revoked`;
  }
}
