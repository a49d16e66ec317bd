import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { JobState, SessionState } from '@svc/chain';
import { jobRegistryInterface } from '@svc/contracts';
import { MemoryStore } from '@svc/platform';
import { JobLifecycleKind } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { sampleValue, scrape, useDevnet, waitUntil } from '@svc/testkit';
import {
  completionOf,
  completionRequest,
  prepareServiceAccounts,
  startCompletionStack,
  type CompletionStack,
} from '../support/completion-stack.js';
import { DEPLOYED_MODELS } from '../support/models.js';

// Short windows, so what the keeper does after them happens within a test.
const devnet = useDevnet({
  models: DEPLOYED_MODELS,
  warmBlobs: true,
  accounts: 14,
  protocol: { disputeWindowSeconds: 2, jobTimeoutSeconds: 12, inactivityTimeoutSeconds: 120 },
});
const store = new MemoryStore();
let stack: CompletionStack;

beforeAll(async () => {
  await prepareServiceAccounts(devnet());
  stack = await startCompletionStack(devnet(), {
    store,
    env: { SESSION_IDLE_CLOSE: '4s', DRAIN_TIMEOUT: '100ms' },
  });
  await stack.startWorker({ faultsFromPrompt: true });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await store.close();
});

/** A sample of the orchestrator process's metrics, as Prometheus scrapes them. */
async function metric(name: string, labels: Record<string, string>): Promise<number> {
  return sampleValue(await scrape(stack.running.metricsUrl!), name, labels) ?? 0;
}

function eventsOf(jobId: string) {
  const reservation = stack.events.find((event) => event.jobId === jobId)?.reservationId;
  return stack.events.filter((event) => event.reservationId === reservation);
}

describe('the job keeper', () => {
  it('releases a completed job once its dispute window passed, and reports it answered and released', async () => {
    const wallet = await stack.payingWallet();
    const completed = completionOf(await stack.complete(wallet.address, 'pay the worker'))!;
    const jobId = completed.service!.jobId;
    await waitUntil(
      () => stack.chain.getJob(BigInt(jobId)),
      (job) => job.state === JobState.Released,
      { what: `job ${jobId} released`, timeoutMs: 15_000, intervalMs: 100 },
    );
    await waitUntil(
      async () => eventsOf(jobId).map((event) => event.kind),
      (kinds) => kinds.includes(JobLifecycleKind.RELEASED),
      { what: 'the released event', timeoutMs: 5_000 },
    );
    const released = eventsOf(jobId).find((event) => event.kind === JobLifecycleKind.RELEASED)!;
    expect(released.feeWei?.decimal).toBe(completed.chargedWei?.decimal);
    expect(await stack.chain.earningsOf(completed.service!.worker!.hex)).toBeGreaterThan(0n);
    const keeper = 'svc_job_orchestrator_keeper_actions_total';
    expect(await metric(keeper, { action: 'release', outcome: 'done' })).toBeGreaterThanOrEqual(1);
    expect(await metric(keeper, { action: 'release', outcome: 'failed' })).toBe(0);
    expect(await metric('svc_job_orchestrator_keeper_rounds_total', { result: 'led' })).toBeGreaterThan(0);
  }, 30_000);

  it('closes a pooled session left idle, and the next call opens a new one', async () => {
    const wallet = await stack.payingWallet();
    const first = completionOf(await stack.complete(wallet.address, 'one'))!.service!.sessionId;
    await waitUntil(
      () => stack.chain.getSession(BigInt(first)),
      (session) => session.state === SessionState.Closed,
      { what: `session ${first} closed while idle`, timeoutMs: 15_000, intervalMs: 200 },
    );
    const second = completionOf(await stack.complete(wallet.address, 'two'))!.service!.sessionId;
    expect(second).not.toBe(first);
    const closed = { action: 'close_session', outcome: 'done' };
    expect(await metric('svc_job_orchestrator_keeper_actions_total', closed)).toBeGreaterThanOrEqual(1);
  }, 30_000);

  it('knows every job before its submission is signed: a call that cannot record its job sends nothing and frees its hold', async () => {
    const wallet = await stack.payingWallet();
    const before = await stack.chain.delegatePosition(wallet.address, stack.signer);
    const blockBefore = await devnet().provider.getBlockNumber();
    // The store refuses the call's tracking of its job once (it went down, or the replica is dying).
    const presence = store.presence;
    const announce = presence.announce.bind(presence);
    let trackingRefused = false;
    presence.announce = async (group, member, value, ttlMs) => {
      if (group === 'jobs:tracked' && !trackingRefused) {
        trackingRefused = true;
        throw new Error('the store is unreachable');
      }
      return announce(group, member, value, ttlMs);
    };
    const events = [];
    try {
      const request = completionRequest(wallet.address, 'never recorded', 'reservation-unrecorded');
      for await (const response of stack.client.runCompletion(request)) events.push(response.event);
    } finally {
      presence.announce = announce;
    }
    expect(trackingRefused).toBe(true);
    expect(events.at(-1)).toMatchObject({ case: 'failed', value: { jobSubmitted: false } });
    // Nothing was signed for it: no job of the wallet on chain, nothing taken, the hold freed (FAILED).
    const submittedForWallet = (
      await devnet().provider.getLogs({
        address: devnet().deployment.jobRegistryAddress,
        fromBlock: blockBefore,
        topics: [jobRegistryInterface.getEvent('JobSubmitted')!.topicHash],
      })
    )
      .map((log) => jobRegistryInterface.parseLog(log)!)
      .filter((log) => String(log.args.payer).toLowerCase() === wallet.address.toLowerCase());
    expect(submittedForWallet).toEqual([]);
    expect(await stack.chain.delegatePosition(wallet.address, stack.signer)).toEqual(before);
    await waitUntil(
      async () =>
        stack.events
          .filter((event) => event.reservationId === 'reservation-unrecorded')
          .map((event) => event.kind),
      (kinds) => kinds.includes(JobLifecycleKind.FAILED) && !kinds.includes(JobLifecycleKind.SUBMITTED),
      { what: 'the FAILED event that frees the hold', timeoutMs: 5_000 },
    );
    // The next call records its job and is answered.
    expect(completionOf(await stack.complete(wallet.address, 'recorded'))?.service?.jobId).toBeDefined();
  }, 60_000);

  it('drives a job whose call is gone to its end: the stalled job fails at its deadline and is refunded', async () => {
    const wallet = await stack.payingWallet();
    const before = await stack.chain.delegatePosition(wallet.address, stack.signer);
    // The caller leaves once the job is submitted; the replica serving it stops right after, so
    // only the keeper of the replica that starts next can see the stalled job through.
    const controller = new AbortController();
    const responses = stack.client.runCompletion(
      completionRequest(wallet.address, 'stall #fault:stall-past-deadline', 'reservation-orphan'),
      { signal: controller.signal },
    );
    const reading = (async () => {
      for await (const response of responses) void response;
    })().catch(() => undefined);
    const submitted = await waitUntil(
      async () =>
        stack.events.find(
          (event) =>
            event.reservationId === 'reservation-orphan' && event.kind === JobLifecycleKind.SUBMITTED,
        ),
      (event) => event !== undefined,
      { what: 'the orphaned job submitted', timeoutMs: 10_000 },
    );
    controller.abort();
    await reading;
    const jobId = BigInt(submitted!.jobId);

    // A replica restart: the old one stops (its run cannot finish), a new one starts on the same store.
    const workers = stack.workers.splice(0);
    await stack.stop();
    stack = await startCompletionStack(devnet(), { store, env: { SESSION_IDLE_CLOSE: '4s' } });
    stack.workers.push(...workers);

    await waitUntil(
      () => stack.chain.getJob(jobId),
      (job) => job.state === JobState.Refunded,
      { what: `job ${jobId} failed and refunded`, timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(await stack.chain.delegatePosition(wallet.address, stack.signer)).toEqual(before);
    await waitUntil(
      async () =>
        stack.events
          .filter((event) => event.reservationId === 'reservation-orphan')
          .map((event) => event.kind),
      (kinds) => kinds.includes(JobLifecycleKind.REFUNDED) && kinds.includes(JobLifecycleKind.FAILED),
      { what: 'failed and refunded events of the orphaned job', timeoutMs: 5_000 },
    );
  }, 60_000);
});
