import { describe, expect, it } from '@jest/globals';
import { Interface, type Log } from 'ethers';
import { JobState, SessionState } from '@svc/chain';
import { jobRegistryAbi } from '@svc/contracts/abi';
import { createLogger, MemoryStore } from '@svc/platform';
import { JobLifecycleKind } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import type { CallIdentity, LifecycleStep } from '../../src/events/lifecycle-events.js';
import { JobKeeper } from '../../src/keeper/job-keeper.js';
import { PendingSubmissions } from '../../src/keeper/pending-submissions.js';
import { TrackedJobs } from '../../src/keeper/tracked-jobs.js';
import { announceOpenSession, OPEN_SESSIONS_GROUP } from '../../src/sessions/session-records.js';
import { JobOrchestratorMetrics } from '../../src/observability/job-orchestrator-metrics.js';

// The job keeper's rounds with the chain faked (its logs, its jobs, its clock): what it adopts and what it
// refunds. The devnet suite (test/completions/keeper.test.ts) runs it against anvil.

const ADDRESSES = {
  jobRegistry: '0x00000000000000000000000000000000000000dd',
  workerRegistry: '0x00000000000000000000000000000000000000ee',
};
const PAYER = '0x00000000000000000000000000000000000000aa';
const WORKER = '0x00000000000000000000000000000000000000bb';
const BLOB = '0x01' + 'ab'.repeat(31);
const DISPUTE_WINDOW = 900;
const registry = new Interface(jobRegistryAbi);
const call: CallIdentity = {
  reservationId: 'res-1',
  requestId: 'req-1',
  paymentPath: 'delegate',
  payer: PAYER,
  keyId: 'key-1',
  model: 'm',
};

function jobSubmittedLog(jobId: bigint, promptBlobHash: string, promptIndex = 0): Log {
  const { data, topics } = registry.encodeEventLog('JobSubmitted', [
    jobId,
    3n,
    PAYER,
    WORKER,
    5n,
    promptBlobHash,
    promptIndex,
  ]);
  return {
    address: ADDRESSES.jobRegistry,
    data,
    topics,
    blockNumber: 5,
    blockHash: '0x' + '11'.repeat(32),
    transactionHash: '0x' + '22'.repeat(32),
    index: 0,
  } as unknown as Log;
}

function keeperWith(options: { logs?: Log[]; job: { state: JobState; completedAt: number }; now: number }) {
  const store = new MemoryStore();
  const published: { kind: string; call: CallIdentity; step: LifecycleStep }[] = [];
  const sent: string[] = [];
  let logs = options.logs ?? [];
  const chain = {
    principal: '0x00000000000000000000000000000000000000cc',
    provider: {
      getBlockNumber: async () => 10,
      getLogs: async () => {
        const batch = logs;
        logs = [];
        return batch;
      },
    },
    reads: {
      addresses: ADDRESSES,
      getJob: async () => ({ ...options.job, deadline: options.now + 100, fee: 5n }),
      // Every session claimed long ago and idle since.
      getSession: async () => ({
        state: SessionState.Active,
        owner: PAYER,
        modelId: '0x01',
        lastActivityAt: 0,
      }),
      parameters: async () => ({ disputeWindowSeconds: DISPUTE_WINDOW }),
    },
    now: async () => options.now,
    refundUndelivered: async () => void sent.push('refundUndelivered'),
    releaseJobs: async () => void sent.push('releaseJobs'),
    timeoutJob: async () => void sent.push('timeoutJob'),
    refundJob: async () => void sent.push('refundJob'),
    closeSession: async (sessionId: bigint) => void sent.push(`closeSession ${sessionId}`),
  };
  const jobs = new TrackedJobs(store);
  const pending = new PendingSubmissions(store);
  const keeper = new JobKeeper({
    store,
    chain: chain as never,
    jobs,
    lifecycle: {
      publish: async (identity: CallIdentity, kind: JobLifecycleKind, step: LifecycleStep) =>
        void published.push({ kind: JobLifecycleKind[kind], call: identity, step }),
    } as never,
    replicaId: 'replica-1',
    intervalMs: 1_000,
    fromBlock: 0,
    confirmations: 0,
    idleCloseSeconds: 600,
    unusedCloseSeconds: 600,
    releaseBatchSize: 50,
    recovery: { ensure: async () => undefined },
    pending,
    metrics: new JobOrchestratorMetrics(),
    logger: createLogger({ service: 'keeper-test', level: 'silent' }),
  } as never);
  return { store, keeper, jobs, pending, published, sent };
}

describe('the job keeper (fakes)', () => {
  it('adopts a submission whose call never heard it land, under the call, so its spend hold is settled', async () => {
    const { store, keeper, jobs, pending, published } = keeperWith({
      // The blob holds two prompts; the call expected the second.
      logs: [jobSubmittedLog(6n, BLOB, 0), jobSubmittedLog(7n, BLOB, 1)],
      job: { state: JobState.Submitted, completedAt: 0 },
      now: 1_000,
    });
    await pending.expect({ promptBlobHash: BLOB, promptIndex: 1 }, call);
    await keeper.round();
    // Its call ended job_failed: an answer to it reaches nobody, so it is refunded once answered.
    expect((await jobs.list()).map((job) => [job.jobId, job.call.reservationId, job.undelivered])).toEqual([
      [7n, 'res-1', true],
    ]);
    expect(published).toEqual([
      {
        kind: 'SUBMITTED',
        call,
        step: expect.objectContaining({ jobId: 7n, feeWei: 5n, sessionId: 3n }) as LifecycleStep,
      },
    ]);
    // Taken once: the same blob again adopts nothing.
    expect(await pending.take({ promptBlobHash: BLOB, promptIndex: 1 })).toBeUndefined();
    await store.close();
  });

  it('leaves a JobSubmitted alone when no call expected its blob', async () => {
    const { store, keeper, jobs, published } = keeperWith({
      logs: [jobSubmittedLog(8n, BLOB)],
      job: { state: JobState.Submitted, completedAt: 0 },
      now: 1_000,
    });
    await keeper.round();
    expect(await jobs.list()).toEqual([]);
    expect(published).toEqual([]);
    await store.close();
  });

  it('refunds a Completed job its call marked undelivered, within the dispute window', async () => {
    const { store, keeper, jobs, sent } = keeperWith({
      job: { state: JobState.Completed, completedAt: 1_000 },
      now: 1_010,
    });
    await jobs.markUndelivered(9n, call);
    await keeper.round();
    expect(sent).toEqual(['refundUndelivered']);
    await store.close();
  });

  it('commits the spend of a Completed job no call serves at once (ANSWERED, once), not at its release', async () => {
    const { store, keeper, jobs, published, sent } = keeperWith({
      job: { state: JobState.Completed, completedAt: 1_000 },
      now: 1_010,
    });
    await jobs.track(9n, call);
    // A job a live call still runs is the call's to settle.
    const running = await jobs.holdRun(9n, 'call-1', 60_000);
    await keeper.round();
    expect(published).toEqual([]);
    await running.end();
    await keeper.round();
    await keeper.round();
    expect(published).toEqual([
      { kind: 'ANSWERED', call, step: expect.objectContaining({ jobId: 9n, feeWei: 5n }) },
    ]);
    expect(sent).toEqual([]);
    // Still tracked: released (and its events published) after the dispute window as before.
    expect((await jobs.list()).map((job) => job.jobId)).toEqual([9n]);
    await store.close();
  });

  it('closes idle sessions, but not one just recovered from the chain while it is held back', async () => {
    const { store, keeper, sent } = keeperWith({
      job: { state: JobState.None, completedAt: 0 },
      now: 10_000,
    });
    const record = { owner: PAYER, modelId: '0x01', worker: WORKER };
    await announceOpenSession(store, 1n, record);
    await announceOpenSession(store, 2n, { ...record, heldBackUntilMs: Date.now() + 60_000 });
    await announceOpenSession(store, 3n, { ...record, heldBackUntilMs: Date.now() - 1 });
    await keeper.round();
    expect(sent.sort()).toEqual(['closeSession 1', 'closeSession 3']);
    expect((await store.presence.list(OPEN_SESSIONS_GROUP)).map((entry) => entry.member)).toEqual(['2']);
    await store.close();
  });

  it('refunds an adopted, unserved settlement only late in its dispute window, so a resend can be served first', async () => {
    for (const [elapsed, expected] of [
      [10, []],
      [DISPUTE_WINDOW / 2 + 1, ['refundUndelivered']],
      [DISPUTE_WINDOW + 1, ['releaseJobs']],
    ] as const) {
      const { store, keeper, jobs, sent } = keeperWith({
        job: { state: JobState.Completed, completedAt: 1_000 },
        now: 1_000 + elapsed,
      });
      await jobs.track(10n, { ...call, paymentPath: 'prepaid_debit' }, { orphan: true });
      await keeper.round();
      expect(sent).toEqual(expected);
      await store.close();
    }
  });
});
