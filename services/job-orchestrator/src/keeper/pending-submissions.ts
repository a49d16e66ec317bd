import type { Store } from '@svc/platform';
import type { CallIdentity } from '../events/lifecycle-events.js';

/** Far beyond the time a broadcast transaction can take to land (its replacements included). */
const PENDING_TTL_MS = 60 * 60_000;

/** Where a job's prompt lies: the blob's versioned hash and the prompt's place among its payloads. */
export interface PromptPlace {
  readonly promptBlobHash: string;
  readonly promptIndex: number;
}

/**
 * Submissions whose outcome their call could not tell (the transaction was broadcast, then the sender
 * failed: no receipt, a node gone), by where their prompt lies. The keeper follows `JobSubmitted`: a job
 * carrying such a prompt is tracked under the call's identity and driven like any
 * other, so a submission that lands after its call gave up is still settled, refunded or counted as spent.
 */
export class PendingSubmissions {
  constructor(private readonly store: Pick<Store, 'values'>) {}

  async expect(prompt: PromptPlace, call: CallIdentity): Promise<void> {
    await this.store.values.set(keyOf(prompt), JSON.stringify(call), PENDING_TTL_MS);
  }

  /** The call a landed job's prompt was expected for, once (undefined when none was). */
  async take(prompt: PromptPlace): Promise<CallIdentity | undefined> {
    const raw = await this.store.values.take(keyOf(prompt));
    return raw === null ? undefined : (JSON.parse(raw) as CallIdentity);
  }
}

function keyOf({ promptBlobHash, promptIndex }: PromptPlace): string {
  return `jobs:pending-submission:${promptBlobHash.toLowerCase()}:${promptIndex}`;
}
