import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { AnswerFrameKind, JobState, decryptAnswerFrame, responseHashOf } from '@svc/chain';
import { HintOutcome } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { connectJobRegistry } from '@svc/contracts';
import { useDevnet, waitUntil } from '@svc/testkit';
import { parseEther } from 'ethers';
import { deterministicAnswer } from '../../src/model/index.js';
import { DEPLOYED_MODELS, MODEL } from '../support/models.js';
import { ServiceSide, type SignedSubmission } from '../support/service-side.js';
import { TestLinkServer } from '../support/test-link-server.js';
import {
  fundedWorkerWallet,
  makeDataDir,
  removeDataDir,
  startTestWorker,
  type TestWorker,
} from '../support/worker-harness.js';

const MAX_BLOCKS = 3;
const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, protocol: { jobTimeoutSeconds: 30 } });
let service: ServiceSide;
let server: TestLinkServer;
let primary: TestWorker;
let hintCounter = 0;

beforeAll(async () => {
  const net = devnet();
  service = new ServiceSide(net.wallet(2), net.deployment, BigInt(net.anvil.chainId));
  await service.deposit();
  server = new TestLinkServer(BigInt(net.anvil.chainId), net.deployment.jobRegistryAddress);
  await server.start();
  primary = await startTestWorker(net, {
    wallet: await fundedWorkerWallet(net),
    dataDir: await makeDataDir(),
    // Polls slower than a test acts: a job on chain is seen by the test before the worker's poll sees it.
    settings: { pending: { maxBlocks: MAX_BLOCKS, perLink: 2, pollMs: 5_000, keepSeconds: 600 } },
    link: {
      target: server.target,
      backoff: { initialDelayMs: 50, maxDelayMs: 200, multiplier: 2, jitter: 1 },
      defaultHeartbeatMs: 100,
      software: 'pending-test',
    },
  });
  await waitUntil(
    async () => primary.worker.link?.connected ?? false,
    (up) => up,
    { what: 'worker link up', timeoutMs: 10_000, intervalMs: 20 },
  );
}, 60_000);

afterAll(async () => {
  await primary?.worker.stop();
  await server?.stop();
  if (primary) await removeDataDir(primary.dataDir);
});

/** A session of its own per test: a given-up job id is never offered again in its session. */
async function freshSession(): Promise<bigint> {
  const id = await service.openSession(primary.worker.address, MODEL.name);
  await service.waitForClaim(id);
  return id;
}

function ask(content: string) {
  return [{ role: 'user' as const, content }];
}

/** Hands the submission to the worker over the link; resolves with its acknowledgement. */
async function offer(
  submission: SignedSubmission,
  overrides: { commitment?: Uint8Array } = {},
): Promise<HintOutcome> {
  const hintId = `pending-${(hintCounter += 1)}`;
  server.send({
    frame: {
      case: 'pendingJob',
      value: {
        hintId,
        jobId: submission.jobId.toString(),
        sessionId: submission.sessionId.toString(),
        attempt: 1,
        rawTransaction: submission.rawTransaction,
        blob: submission.sidecar.data,
        kzgCommitment: overrides.commitment ?? submission.sidecar.commitment,
      },
    },
  });
  const ack = await waitUntil(
    async () => server.framesOf('hintAck').find((frame) => frame.hintId === hintId),
    (found) => found !== undefined,
    { what: `ack of ${hintId}`, timeoutMs: 10_000, intervalMs: 20 },
  );
  return ack!.outcome;
}

function streamed(submission: SignedSubmission): string {
  return primary.channel
    .deltasOf(submission.jobId)
    .map((delta) =>
      decryptAnswerFrame(AnswerFrameKind.Delta, delta.frame, submission.replyKey, {
        jobId: delta.jobId,
        attempt: delta.attempt,
        seq: delta.seq,
      }),
    )
    .join('');
}

async function rpc(method: string, params: unknown[] = []): Promise<unknown> {
  return devnet().provider.send(method, params);
}

describe('starting before inclusion', () => {
  it('streams the answer while the submission is unmined, and commits it once mined', async () => {
    const sessionId = await freshSession();
    await rpc('evm_setAutomine', [false]);
    try {
      const submission = await service.signSubmission(sessionId, MODEL.name, ask('before the block'));
      await service.broadcast(submission);
      expect(await offer(submission)).toBe(HintOutcome.ACCEPTED);
      const final = await waitUntil(
        async () => primary.channel.finalOf(submission.jobId),
        (found) => found !== undefined,
        { what: 'final before the block', timeoutMs: 10_000, intervalMs: 20 },
      );
      // Deltas and the signed final came with the job still unmined.
      expect((await service.chain.getJob(submission.jobId)).state).toBe(JobState.None);
      expect(streamed(submission)).toBe(deterministicAnswer(submission.messages));
      await rpc('evm_mine');
      await rpc('evm_setAutomine', [true]);
      const job = await service.waitForOutcome(submission.jobId);
      expect(job.state).toBe(JobState.Completed);
      expect(await service.committedHash(job)).toBe(responseHashOf(final!.frame));
      expect(primary.channel.finals.filter((answer) => answer.jobId === submission.jobId)).toHaveLength(1);
    } finally {
      await rpc('evm_setAutomine', [true]);
    }
  });

  it('gives up and reports a submission that is never mined', async () => {
    const sessionId = await freshSession();
    await rpc('evm_setAutomine', [false]);
    let submission: SignedSubmission;
    try {
      submission = await service.signSubmission(sessionId, MODEL.name, ask('dropped'));
      await service.broadcast(submission);
      expect(await offer(submission)).toBe(HintOutcome.ACCEPTED);
      await rpc('anvil_dropTransaction', [submission.hash]);
      for (let block = 0; block <= MAX_BLOCKS; block += 1) await rpc('evm_mine');
      await waitUntil(
        async () => primary.channel.errors.find((error) => error.jobId === submission.jobId),
        (found) => found !== undefined,
        { what: 'the worker gave up', timeoutMs: 10_000, intervalMs: 20 },
      );
    } finally {
      await rpc('evm_setAutomine', [true]);
    }
    expect(primary.channel.errors).toContainEqual({
      jobId: submission.jobId,
      attempt: 1,
      reason: 'not_mined',
    });
    expect((await service.chain.getJob(submission.jobId)).state).toBe(JobState.None);
  });

  it('does not commit the first answer when a replacement with another blob lands', async () => {
    const sessionId = await freshSession();
    await rpc('evm_setAutomine', [false]);
    let first: SignedSubmission;
    try {
      first = await service.signSubmission(sessionId, MODEL.name, ask('the first prompt'));
      await service.broadcast(first);
      expect(await offer(first)).toBe(HintOutcome.ACCEPTED);
      await waitUntil(
        async () => primary.channel.finalOf(first.jobId),
        (found) => found !== undefined,
        { what: 'first final', timeoutMs: 10_000, intervalMs: 20 },
      );
      // Same nonce, same job id, another prompt, a higher tip: it replaces the first in the pool.
      const nonce = (await devnet().provider.getTransaction(first.hash))!.nonce;
      const second = await service.signSubmission(sessionId, MODEL.name, ask('another prompt'), {
        nonce,
        jobId: first.jobId,
        tip: 20_000_000_000n,
      });
      await service.broadcast(second);
      await rpc('evm_mine');
    } finally {
      await rpc('evm_setAutomine', [true]);
    }
    const job = await service.waitForOutcome(first.jobId);
    expect(job.state).toBe(JobState.Failed);
    expect(primary.channel.errors).toContainEqual({ jobId: first.jobId, attempt: 1, reason: 'replaced' });
  });

  it("answers the service's submission for a keyed wallet in the service's own session, and declines the wallet's own submission into it", async () => {
    const net = devnet();
    const wallet = net.wallet(3);
    const serviceAddress = net.wallet(2).address;
    const registry = connectJobRegistry(net.deployment.jobRegistryAddress, wallet);
    await (await registry.depositAndAuthorize(serviceAddress, { value: parseEther('1') })).wait();
    const sessionId = await freshSession();
    // The wallet signs a submission of its own into the service's session, taking the next job id.
    const theirs = await new ServiceSide(wallet, net.deployment, BigInt(net.anvil.chainId)).signSubmission(
      sessionId,
      MODEL.name,
      ask('front-run'),
    );
    expect(await offer(theirs)).toBe(HintOutcome.DECLINED);
    expect(primary.channel.deltasOf(theirs.jobId)).toHaveLength(0);
    await rpc('evm_setAutomine', [false]);
    try {
      const ours = await service.signSubmission(sessionId, MODEL.name, ask('for a keyed wallet'), {
        payer: wallet.address,
      });
      expect(ours.jobId).toBe(theirs.jobId);
      await service.broadcast(ours);
      expect(await offer(ours)).toBe(HintOutcome.ACCEPTED);
      await rpc('evm_mine');
      await rpc('evm_setAutomine', [true]);
      const job = await service.waitForOutcome(ours.jobId);
      expect(job.state).toBe(JobState.Completed);
      expect(job.payer).toBe(wallet.address);
      expect(job.delegate).toBe(serviceAddress);
      expect(streamed(ours)).toBe(deterministicAnswer(ours.messages));
    } finally {
      await rpc('evm_setAutomine', [true]);
    }
  });

  it('refuses a sidecar whose commitment does not match, before generating anything', async () => {
    const sessionId = await freshSession();
    const submission = await service.signSubmission(sessionId, MODEL.name, ask('mismatched sidecar'));
    const other = await service.signSubmission(sessionId, MODEL.name, ask('some other blob'));
    expect(await offer(submission, { commitment: other.sidecar.commitment })).toBe(HintOutcome.DECLINED);
    expect(primary.channel.deltasOf(submission.jobId)).toHaveLength(0);
  });

  it('refuses unconfirmed work beyond one job per session', async () => {
    const sessionId = await freshSession();
    await rpc('evm_setAutomine', [false]);
    try {
      const first = await service.signSubmission(sessionId, MODEL.name, ask('one at a time'));
      await service.broadcast(first);
      expect(await offer(first)).toBe(HintOutcome.ACCEPTED);
      const next = await service.signSubmission(sessionId, MODEL.name, ask('and another'), {
        jobId: first.jobId + 1n,
      });
      expect(await offer(next)).toBe(HintOutcome.DECLINED);
      expect(primary.channel.deltasOf(next.jobId)).toHaveLength(0);
      await rpc('evm_mine');
      await rpc('evm_setAutomine', [true]);
      expect((await service.waitForOutcome(first.jobId)).state).toBe(JobState.Completed);
    } finally {
      await rpc('evm_setAutomine', [true]);
    }
  });

  it("takes the session's next job once the last one is on chain, before its own poll saw it land and without waiting for its commitment", async () => {
    const sessionId = await freshSession();
    await rpc('evm_setAutomine', [false]);
    try {
      const first = await service.signSubmission(sessionId, MODEL.name, ask('first of two'));
      await service.broadcast(first);
      expect(await offer(first)).toBe(HintOutcome.ACCEPTED);
      // Mined: no longer unconfirmed, though its completeJob waits in the pool for the next block.
      await rpc('evm_mine');
      await waitUntil(
        () => service.chain.getJob(first.jobId),
        (job) => job.state !== JobState.None,
        { what: 'the first job on chain', timeoutMs: 10_000, intervalMs: 20 },
      );
      const next = await service.signSubmission(sessionId, MODEL.name, ask('second of two'), {
        jobId: first.jobId + 1n,
      });
      await service.broadcast(next);
      expect(await offer(next)).toBe(HintOutcome.ACCEPTED);
      await rpc('evm_setAutomine', [true]);
      await rpc('evm_mine');
      for (const jobId of [first.jobId, next.jobId])
        await waitUntil(
          () => service.chain.getJob(jobId),
          (job) => job.state === JobState.Completed,
          { what: `job ${jobId} committed`, timeoutMs: 20_000 },
        );
    } finally {
      await rpc('evm_setAutomine', [true]);
    }
  });

  // Last: the worker drains for good.
  it('commits a job it answered before inclusion when the chain announces it with no slot to take it', async () => {
    const sessionId = await freshSession();
    await rpc('evm_setAutomine', [false]);
    let draining: Promise<void> | undefined;
    try {
      const submission = await service.signSubmission(sessionId, MODEL.name, ask('answered, then full'));
      await service.broadcast(submission);
      expect(await offer(submission)).toBe(HintOutcome.ACCEPTED);
      await waitUntil(
        async () => primary.channel.finalOf(submission.jobId),
        (found) => found !== undefined,
        { what: 'final before the block', timeoutMs: 10_000, intervalMs: 20 },
      );
      // The scheduler takes no new job now, so it refuses what the chain announces next: a job whose
      // signed final is out must be committed all the same, not failed (its caller has the answer).
      draining = primary.worker.drain();
      await rpc('evm_mine');
      await rpc('evm_setAutomine', [true]);
      const job = await service.waitForOutcome(submission.jobId);
      expect(job.state).toBe(JobState.Completed);
      expect(primary.channel.errors.filter((error) => error.jobId === submission.jobId)).toEqual([]);
    } finally {
      await rpc('evm_setAutomine', [true]);
      await draining;
    }
  });
});
