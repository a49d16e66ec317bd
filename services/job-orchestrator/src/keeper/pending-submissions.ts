import type { Store } from '@svc/platform';
import type { CallIdentity } from '../events/lifecycle-events.js';

/** Far beyond the time a broadcast transaction can take to land (its replacements included). */
const PENDING_TTL_MS = 60 * 60_000;

/**
 * Submissions whose outcome their call could not tell (the transaction was broadcast, then the sender
 * failed: no receipt, a node gone), by the prompt blob's versioned hash. The keeper follows
 * `JobSubmitted`: a job carrying such a blob is tracked under the call's identity and driven like any
 * other, so a submission that lands after its call gave up is still settled, refunded or counted as spent.
 */
export class PendingSubmissions {
  constructor(private readonly store: Pick<Store, 'values'>) {}

  async expect(promptBlobHash: string, call: CallIdentity): Promise<void> {
    await this.store.values.set(keyOf(promptBlobHash), JSON.stringify(call), PENDING_TTL_MS);
  }

  /** The call a landed job's blob was expected for, once (undefined when none was). */
  async take(promptBlobHash: string): Promise<CallIdentity | undefined> {
    const raw = await this.store.values.take(keyOf(promptBlobHash));
    return raw === null ? undefined : (JSON.parse(raw) as CallIdentity);
  }
}

function keyOf(promptBlobHash: string): string {
  return `jobs:pending-submission:${promptBlobHash.toLowerCase()}`;
}
