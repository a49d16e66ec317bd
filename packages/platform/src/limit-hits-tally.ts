// The shared store's tally of API-key refusals (`limitHits`, docs/key-service.md): gateways count each
// refusal in it and flush it to the key-service in batches; the key-service adds what it holds, not yet
// applied, to the keys it lists. One field per key and limit: `<kind>:<keyId>`.

/** The tally every limit hit is counted in until the key-service has applied it. */
export const LIMIT_HITS_TALLY = 'limit-hits';

/** The limits as tally fields name them (the key-service's names). */
export type LimitHitKind = 'rate' | 'concurrency' | 'spend_cap' | 'session_opens';

export const LIMIT_HIT_KINDS: readonly LimitHitKind[] = ['rate', 'concurrency', 'spend_cap', 'session_opens'];

/** The tally field counting `kind` refusals of the key `keyId`. */
export function limitHitField(kind: LimitHitKind, keyId: string): string {
  return `${kind}:${keyId}`;
}
