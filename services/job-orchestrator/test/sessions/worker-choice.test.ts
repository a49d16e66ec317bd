import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MemoryStore } from '@svc/platform';
import { useDevnet } from '@svc/testkit';
import {
  completionOf,
  prepareServiceAccounts,
  retryOf,
  shapeOf,
  startCompletionStack,
  type CompletionStack,
} from '../support/completion-stack.js';
import { DEPLOYED_MODELS } from '../support/models.js';
import type { ReferenceWorker } from '../support/reference-worker.js';

// A worker that over-advertises its room and stalls every job (issue 27, item 5): the first call it gets
// costs a job timeout and is answered by another worker after a reassignment; the service remembers the
// failure, so the next calls go straight to the worker that answered. A short job timeout keeps the stall
// to seconds.
const devnet = useDevnet({
  models: DEPLOYED_MODELS,
  warmBlobs: true,
  accounts: 14,
  protocol: { jobTimeoutSeconds: 8 },
});
const store = new MemoryStore();
let stack: CompletionStack;
/** Claims sessions, then produces nothing until its deadline; reports the most room. */
let staller: ReferenceWorker;
let honest: ReferenceWorker;

beforeAll(async () => {
  await prepareServiceAccounts(devnet());
  stack = await startCompletionStack(devnet(), { store });
  staller = await stack.startWorker({ fault: 'stall-past-deadline', capacity: 8 });
  honest = await stack.startWorker({ capacity: 2 });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await store.close();
});

describe('a worker that claims and then stalls', () => {
  it('costs one call a reassignment; the next calls go straight to the worker that answered', async () => {
    const wallet = await stack.payingWallet();
    const first = await stack.complete(wallet.address, 'first');
    expect(shapeOf(first)).toEqual(['retrying', 'started', 'delta', 'completed']);
    expect(completionOf(first)!.service!.worker!.hex).toBe(honest.wallet.address);
    expect(retryOf(first)).toBeDefined();

    for (const content of ['second', 'third']) {
      // A new wallet: its own pool, so a new session is opened for it and a worker chosen.
      const other = await stack.payingWallet();
      const started = Date.now();
      const events = await stack.complete(other.address, content);
      expect(shapeOf(events)).toEqual(['started', 'delta', 'completed']);
      expect(completionOf(events)!.service!.worker!.hex).toBe(honest.wallet.address);
      expect(Date.now() - started).toBeLessThan(5_000);
    }
    expect(staller.wallet.address).not.toBe(honest.wallet.address);
  }, 90_000);
});
