import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { fromBinary } from '@bufbuild/protobuf';
import { Wallet } from 'ethers';
import { JobState, responseHashOf } from '@svc/chain';
import { MemoryStore } from '@svc/platform';
import {
  ConnectRequestSchema,
  FrameRejectionReason,
  HintOutcome,
  type ConnectRequest,
} from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { useDevnet, waitUntil } from '@svc/testkit';
import {
  AnswerFrameIntake,
  jobFrameStreamKey,
  type AnswerFrame,
} from '../../src/link/answer-frame-intake.js';
import { RegistryJobAttempts } from '../../src/link/job-attempts.js';
import { ChainSide } from '../support/chain-side.js';
import { withCountedFrames, type CountedFrames } from '../support/counted-frames.js';
import { DEPLOYED_MODELS, MODEL } from '../support/models.js';
import { OrchestratorReplica } from '../support/orchestrator-harness.js';
import { RawLink } from '../support/raw-link.js';
import { fundedWallet, startReferenceWorker, type ReferenceWorker } from '../support/reference-worker.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, protocol: { jobTimeoutSeconds: 30 } });
let store: MemoryStore;
let replica: OrchestratorReplica;
let worker: ReferenceWorker;
let service: ChainSide;
let jobId: bigint;
let counted: CountedFrames;

beforeAll(async () => {
  store = new MemoryStore();
  const served = withCountedFrames(store);
  counted = served.counted;
  replica = new OrchestratorReplica(devnet(), served.store);
  await replica.start();
  service = new ChainSide(devnet(), devnet().wallet(4));
  await service.deposit();
  worker = await startReferenceWorker(devnet(), replica.target);
  await waitUntil(
    () => replica.server.live(),
    (live) => live.length === 1,
    {
      what: 'the worker linked',
      timeoutMs: 10_000,
    },
  );
}, 60_000);

afterAll(async () => {
  await worker?.stop();
  await replica?.stop();
  await store?.close();
});

async function streamFrames(id: bigint): Promise<{ dedupId: string; frame: ConnectRequest['frame'] }[]> {
  const frames = await store.frames.read(jobFrameStreamKey(id), null, { count: 1_000 });
  return frames.map((entry) => ({
    dedupId: entry.dedupId,
    frame: fromBinary(ConnectRequestSchema, entry.payload).frame,
  }));
}

describe('a real job answered over the link', () => {
  it('reaches the worker with a session hint, which it claims and acknowledges', async () => {
    const { sessionId, claimDeadline } = await service.openSession(worker.worker.address);
    const sent = replica.server.sendHint(worker.worker.address, {
      case: 'sessionOpened',
      value: {
        hintId: 'session-hint',
        sessionId: sessionId.toString(),
        model: MODEL.name,
        claimDeadline: { seconds: BigInt(claimDeadline), nanos: 0 },
      },
    });
    expect(sent).toBe(true);
    expect(
      replica.server.sendHint(Wallet.createRandom().address, {
        case: 'sessionOpened',
        value: { hintId: 'nobody', sessionId: sessionId.toString(), model: MODEL.name },
      }),
    ).toBe(false);
    await service.waitForClaim(sessionId);
    const acks = await waitUntil(
      async () => replica.hintAcks,
      (received) => received.length === 1,
      { what: 'the hint acknowledgement', timeoutMs: 5_000 },
    );
    expect(acks[0]).toMatchObject({
      worker: worker.worker.address,
      ack: { hintId: 'session-hint', outcome: HintOutcome.ACCEPTED },
    });

    jobId = await service.submitJob(sessionId, 'Stream this answer to me please, word by word.');
    const job = await waitUntil(
      () => service.chain.getJob(jobId),
      (current) => current.state === JobState.Completed,
      { what: 'the job completed', timeoutMs: 20_000, intervalMs: 50 },
    );

    const frames = await waitUntil(
      () => streamFrames(jobId),
      (found) => found.some((entry) => entry.frame.case === 'finalAnswer'),
      { what: 'the final in the job stream', timeoutMs: 5_000 },
    );
    const chunks = frames.filter((entry) => entry.frame.case === 'chunk');
    expect(chunks.length).toBeGreaterThan(1);
    expect(chunks.map((entry) => entry.dedupId)).toEqual(chunks.map((_, index) => `1:${index + 1}`));
    const finals = frames.filter((entry) => entry.frame.case === 'finalAnswer');
    expect(finals).toHaveLength(1);
    expect(finals[0]!.dedupId).toBe('1:final');
    const final = finals[0]!.frame;
    if (final.case !== 'finalAnswer') throw new Error('not a final');
    expect(final.value).toMatchObject({ jobId: jobId.toString(), attempt: 1, seq: chunks.length });
    expect(responseHashOf(final.value.sealedAnswer)).toBe(
      (await service.chain.commitmentOf(job))?.responseHash,
    );
  }, 60_000);

  it('keeps one copy of the final the worker re-sends after its link was replaced and redialled', async () => {
    const firstLinkId = (await replica.server.live())[0]!.linkId;
    const sentBefore = counted.appends.get('1:final') ?? 0;
    // A second link with the worker's own key replaces the worker's; the worker redials and replaces it back.
    const intruder = new RawLink(replica.target);
    try {
      expect((await intruder.handshake(worker.wallet.address, worker.wallet))?.case).toBe('welcome');
      await waitUntil(
        async () => counted.appends.get('1:final') ?? 0,
        (sent) => sent > sentBefore,
        {
          what: 'the final sent again after the redial',
          timeoutMs: 10_000,
        },
      );
    } finally {
      intruder.close();
    }
    const live = await waitUntil(
      () => replica.server.live(),
      (workers) => workers.length === 1 && workers[0]!.linkId !== firstLinkId,
      { what: 'the worker on its new link', timeoutMs: 5_000 },
    );
    expect(live[0]!.address).toBe(worker.worker.address);
    const finals = (await streamFrames(jobId)).filter((entry) => entry.frame.case === 'finalAnswer');
    expect(finals).toHaveLength(1);
  });

  it('lets the worker forget a final once acknowledged as committed', async () => {
    await waitUntil(async () => worker.worker.link?.connected ?? false, Boolean, {
      what: 'the worker linked',
      timeoutMs: 5_000,
    });
    await waitUntil(
      () => worker.worker.journal.all(),
      (saved) => saved.length === 1,
      {
        what: 'the final in the worker journal',
        timeoutMs: 5_000,
      },
    );
    expect(await replica.server.acknowledgeFinal(jobId, 2, true)).toBe(false);
    expect(await replica.server.acknowledgeFinal(jobId, 1, false)).toBe(true);
    expect(await replica.server.acknowledgeFinal(jobId, 1, true)).toBe(true);
    await waitUntil(
      () => worker.worker.journal.all(),
      (saved) => saved.length === 0,
      {
        what: 'the journal emptied by the acknowledgement',
        timeoutMs: 5_000,
      },
    );
    expect(await replica.server.acknowledgeFinal(jobId + 1000n, 1, true)).toBe(false);
  });

  it('rejects over the link the frames of a worker that is not the job’s current worker', async () => {
    const other = await fundedWallet(devnet());
    await service.registerWorker(other);
    const link = new RawLink(replica.target);
    try {
      expect((await link.handshake(other.address, other))?.case).toBe('welcome');
      link.send({
        case: 'chunk',
        value: { jobId: jobId.toString(), attempt: 1, seq: 99, sealedDelta: new Uint8Array([1]) },
      });
      expect(await link.next()).toMatchObject({
        case: 'frameRejection',
        value: {
          jobId: jobId.toString(),
          attempt: 1,
          seq: 99,
          reason: FrameRejectionReason.NOT_CURRENT_WORKER,
        },
      });
      expect((await streamFrames(jobId)).map((entry) => entry.dedupId)).not.toContain('1:99');
    } finally {
      link.close();
    }
  });
});

describe('the frame intake over the chain', () => {
  let intake: AnswerFrameIntake;
  const chunk = (overrides: Partial<{ jobId: string; attempt: number; seq: number; bytes: number[] }>) =>
    ({
      case: 'chunk',
      value: {
        jobId: overrides.jobId ?? jobId.toString(),
        attempt: overrides.attempt ?? 1,
        seq: overrides.seq ?? 500,
        sealedDelta: new Uint8Array(overrides.bytes ?? [9, 9]),
      },
    }) as AnswerFrame;

  beforeAll(() => {
    intake = new AnswerFrameIntake(new RegistryJobAttempts(replica.chain), store.frames);
  });

  it('appends a frame of the current worker and attempt once, however often it is repeated', async () => {
    const before = (await streamFrames(jobId)).length;
    const verdicts = await Promise.all(
      Array.from({ length: 5 }, () => intake.accept(worker.worker.address, chunk({}))),
    );
    expect(verdicts.every((verdict) => verdict.accepted)).toBe(true);
    expect(verdicts.filter((verdict) => verdict.accepted && !verdict.duplicate)).toHaveLength(1);
    const after = await streamFrames(jobId);
    expect(after).toHaveLength(before + 1);
    expect(after.filter((entry) => entry.dedupId === '1:500')).toHaveLength(1);
  });

  it('rejects a stale attempt, another worker, an unknown job and malformed frames', async () => {
    const address = worker.worker.address;
    expect(await intake.accept(address, chunk({ attempt: 2 }))).toEqual({
      accepted: false,
      reason: FrameRejectionReason.STALE_ATTEMPT,
    });
    expect(await intake.accept(Wallet.createRandom().address, chunk({}))).toEqual({
      accepted: false,
      reason: FrameRejectionReason.NOT_CURRENT_WORKER,
    });
    expect(await intake.accept(address, chunk({ jobId: '987654' }))).toEqual({
      accepted: false,
      reason: FrameRejectionReason.UNKNOWN_JOB,
    });
    for (const malformed of [
      chunk({ jobId: 'not-a-number' }),
      chunk({ attempt: 0 }),
      chunk({ seq: 0 }),
      chunk({ bytes: [] }),
      {
        case: 'finalAnswer',
        value: {
          jobId: jobId.toString(),
          attempt: 1,
          seq: 1,
          sealedAnswer: new Uint8Array([1]),
          workerSignature: new Uint8Array(64),
        },
      } as AnswerFrame,
    ]) {
      expect(await intake.accept(address, malformed)).toEqual({
        accepted: false,
        reason: FrameRejectionReason.MALFORMED,
      });
    }
  });
});
