// Every Redis key this store writes, in one place, under the store's namespace. Keys that one script
// touches together share a hash tag (`{…}`), so the layout also holds on Redis Cluster.

export class RedisKeyspace {
  constructor(readonly namespace: string) {}

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

  revocations(): string {
    return `${this.namespace}:revoked`;
  }
}
