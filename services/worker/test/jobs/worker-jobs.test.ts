import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  AnswerFrameKind,
  ContractRevertError,
  JobState,
  SessionKeyPair,
  decryptAnswerFrame,
  isFinalAnswerSignedBy,
  responseHashOf,
} from '@svc/chain';
import { connectJobRegistry, withDecodedRevert } from '@svc/contracts';
import { useDevnet } from '@svc/testkit';
import { connectWorkerChain } from '../../src/chain/worker-chain.js';
import { deterministicAnswer, restartedDeterministicAnswer } from '../../src/model/index.js';
import { DEPLOYED_MODELS, MODEL, OTHER_MODEL } from '../support/models.js';
import { ServiceSide, type SubmittedJob } from '../support/service-side.js';
import {
  fundedWorkerWallet,
  makeDataDir,
  removeDataDir,
  startTestWorker,
  type TestWorker,
} from '../support/worker-harness.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, protocol: { jobTimeoutSeconds: 12 } });
let service: ServiceSide;
let primary: TestWorker;
let sessionId: bigint;

beforeAll(async () => {
  const net = devnet();
  service = new ServiceSide(net.wallet(2), net.deployment, BigInt(net.anvil.chainId));
  await service.deposit();
  primary = await startTestWorker(net, {
    wallet: await fundedWorkerWallet(net),
    dataDir: await makeDataDir(),
  });
  sessionId = await service.openSession(primary.worker.address, MODEL.name);
  await service.waitForClaim(sessionId);
}, 60_000);

afterAll(async () => {
  await primary?.worker.stop();
  if (primary) await removeDataDir(primary.dataDir);
});

function ask(content: string) {
  return { kind: 'prompt' as const, messages: [{ role: 'user' as const, content }] };
}

function openFinal(job: SubmittedJob, worker = primary) {
  const final = worker.channel.finalOf(job.jobId)!;
  const text = decryptAnswerFrame(AnswerFrameKind.Final, final.frame, job.replyKey, {
    jobId: job.jobId,
    attempt: final.attempt,
    seq: final.seq,
  });
  return { final, text };
}

function streamedText(job: SubmittedJob, worker = primary): string {
  return worker.channel
    .deltasOf(job.jobId)
    .map((delta) =>
      decryptAnswerFrame(AnswerFrameKind.Delta, delta.frame, job.replyKey, {
        jobId: delta.jobId,
        attempt: delta.attempt,
        seq: delta.seq,
      }),
    )
    .join('');
}

describe('serving jobs on chain', () => {
  it('claims a session naming it and commits the hash of a final that decrypts to the answer', async () => {
    const job = await service.submitJob(sessionId, MODEL.name, ask('What is two plus two?'));
    const onChain = await service.waitForOutcome(job.jobId);
    expect(onChain.state).toBe(JobState.Completed);
    const { final, text } = openFinal(job);
    expect(await service.committedHash(onChain)).toBe(responseHashOf(final.frame));
    expect(text).toBe(deterministicAnswer(job.messages));
    expect(streamedText(job)).toBe(text);
    const seqs = primary.channel.deltasOf(job.jobId).map((delta) => delta.seq);
    expect(seqs).toEqual(seqs.map((_, index) => index + 1));
    expect(final.seq).toBe(seqs.length);
    const binding = {
      chainId: BigInt(devnet().anvil.chainId),
      jobRegistry: devnet().deployment.jobRegistryAddress,
      jobId: job.jobId,
      attempt: onChain.attempt,
      sessionId: onChain.sessionId,
    };
    expect(final.attempt).toBe(1);
    expect(isFinalAnswerSignedBy(primary.worker.address, binding, final.frame, final.signature)).toBe(true);
  });

  it('fails a blob encrypted to another key, and keeps serving', async () => {
    const stranger = SessionKeyPair.generate().publicKey;
    const bad = await service.submitJob(sessionId, MODEL.name, { ...ask('secret'), encryptTo: stranger });
    expect((await service.waitForOutcome(bad.jobId)).state).toBe(JobState.Failed);
    expect(primary.channel.errors).toContainEqual({
      jobId: bad.jobId,
      attempt: 1,
      reason: 'undecryptable_prompt',
    });
    const good = await service.submitJob(sessionId, MODEL.name, ask('still there?'));
    expect((await service.waitForOutcome(good.jobId)).state).toBe(JobState.Completed);
  });

  it('fails malformed blobs without crashing', async () => {
    const random = await service.submitJob(sessionId, MODEL.name, { kind: 'random' });
    const zeros = await service.submitJob(sessionId, MODEL.name, {
      kind: 'raw',
      blob: new Uint8Array(131_072),
    });
    expect((await service.waitForOutcome(random.jobId)).state).toBe(JobState.Failed);
    expect((await service.waitForOutcome(zeros.jobId)).state).toBe(JobState.Failed);
    const reasons = primary.channel.errors.filter((error) =>
      [random.jobId, zeros.jobId].includes(error.jobId),
    );
    // An all-zero blob frames no payload at all (docs/protocol.md, Blob format).
    expect(reasons.map((error) => error.reason)).toEqual(['malformed_blob', 'malformed_blob']);
  });

  it("refuses a prompt for a model that is not its session's", async () => {
    const job = await service.submitJob(sessionId, MODEL.name, { ...ask('hello'), model: OTHER_MODEL.name });
    expect((await service.waitForOutcome(job.jobId)).state).toBe(JobState.Failed);
    expect(primary.channel.errors).toContainEqual({ jobId: job.jobId, attempt: 1, reason: 'wrong_model' });
  });

  it('is the only worker that can claim a session naming it', async () => {
    const net = devnet();
    const otherWallet = await fundedWorkerWallet(net);
    const other = await startTestWorker(net, { wallet: otherWallet, dataDir: await makeDataDir() });
    try {
      const opened = await service.openSession(primary.worker.address, MODEL.name);
      await service.waitForClaim(opened);
      const session = await service.chain.getSession(opened);
      expect(session.worker).toBe(primary.worker.address);
      const intruder = connectWorkerChain({
        provider: net.provider,
        wallet: otherWallet,
        jobRegistryAddress: net.deployment.jobRegistryAddress,
        workerRegistryAddress: net.deployment.workerRegistryAddress,
        pollIntervalMs: 25,
      });
      const refused = await intruder.transactions
        .claimSession(opened, SessionKeyPair.generate().publicKey)
        .catch((error: unknown) => error);
      await intruder.close();
      expect(refused).toBeInstanceOf(ContractRevertError);
      expect(other.worker.status().heldSessions).toBe(0);
    } finally {
      await other.worker.stop();
      await removeDataDir(other.dataDir);
    }
  });
});

describe('fault switches of the built-in model', () => {
  it('fail before the first chunk: the job is failed and nothing streamed', async () => {
    const job = await service.submitJob(sessionId, MODEL.name, ask('x #fault:fail-before-first-chunk'));
    expect((await service.waitForOutcome(job.jobId)).state).toBe(JobState.Failed);
    expect(primary.channel.deltasOf(job.jobId)).toHaveLength(0);
    expect(primary.channel.finalOf(job.jobId)).toBeUndefined();
  });

  it('fail after chunks: the job is failed after that many deltas', async () => {
    const job = await service.submitJob(sessionId, MODEL.name, ask('x #fault:fail-after-chunks=3'));
    expect((await service.waitForOutcome(job.jobId)).state).toBe(JobState.Failed);
    expect(primary.channel.deltasOf(job.jobId)).toHaveLength(3);
    expect(primary.channel.finalOf(job.jobId)).toBeUndefined();
  });

  it('restart after chunks: commits a different answer than the one that started streaming', async () => {
    const job = await service.submitJob(sessionId, MODEL.name, ask('x #fault:restart-after-chunks=2'));
    const onChain = await service.waitForOutcome(job.jobId);
    expect(onChain.state).toBe(JobState.Completed);
    const { final, text } = openFinal(job);
    expect(await service.committedHash(onChain)).toBe(responseHashOf(final.frame));
    expect(text).toBe(restartedDeterministicAnswer(job.messages));
    expect(text.startsWith(streamedText(job))).toBe(false);
  });

  it('commit mismatched hash: commits a hash that is not its signed final', async () => {
    const job = await service.submitJob(sessionId, MODEL.name, ask('x #fault:commit-mismatched-hash'));
    const onChain = await service.waitForOutcome(job.jobId);
    expect(onChain.state).toBe(JobState.Completed);
    const { final, text } = openFinal(job);
    expect(text).toBe(deterministicAnswer(job.messages));
    expect(await service.committedHash(onChain)).not.toBe(responseHashOf(final.frame));
    // The worker signs what the contract verifies: its signed final proves the mismatch on chain.
    // Simulated only, so the slash does not take this file's worker out of service.
    const registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, devnet().wallet(2));
    const commitBatch = await service.chain.commitBatchOf(
      onChain,
      (await service.chain.commitmentOf(onChain))!,
    );
    await registry.disputeMismatch.staticCall(job.jobId, onChain.attempt, final.frame, final.signature, [
      ...commitBatch,
    ]);
    const stale = await withDecodedRevert(() =>
      registry.disputeMismatch.staticCall(job.jobId, onChain.attempt + 1, final.frame, final.signature, [
        ...commitBatch,
      ]),
    ).catch((error: unknown) => error);
    expect(stale).toBeInstanceOf(ContractRevertError);
    expect((stale as ContractRevertError).revert.name).toBe('StaleAttempt');
  });

  it('stall past the deadline: the worker gives up in time and fails the job itself', async () => {
    const job = await service.submitJob(sessionId, MODEL.name, ask('x #fault:stall-past-deadline'));
    const onChain = await service.waitForOutcome(job.jobId, 30_000);
    expect(onChain.state).toBe(JobState.Failed);
    expect(primary.channel.errors).toContainEqual({ jobId: job.jobId, attempt: 1, reason: 'model_failed' });
  }, 40_000);
});

describe("a worker's slots and commitments", () => {
  it('gives its slot to the next job once a job is answered, so both answers share one commitment batch', async () => {
    const net = devnet();
    const single = await startTestWorker(net, {
      wallet: await fundedWorkerWallet(net),
      dataDir: await makeDataDir(),
      settings: { capacity: 1 },
    });
    try {
      const session = await service.openSession(single.worker.address, MODEL.name);
      await service.waitForClaim(session);
      // The second job lands while the first is answered or its commitment held: with the slot kept until
      // the commitment was mined, the second could only start after it, in a later commitment.
      const first = await service.submitJob(session, MODEL.name, ask('What is one plus one?'));
      const second = await service.submitJob(session, MODEL.name, ask('What is two plus two?'));
      for (const job of [first, second]) {
        expect((await service.waitForOutcome(job.jobId)).state).toBe(JobState.Completed);
      }
      const registry = connectJobRegistry(net.deployment.jobRegistryAddress, net.provider);
      const committed = await registry.queryFilter(
        registry.filters.JobCompleted(),
        net.deployment.deploymentBlock,
      );
      const transactionOf = (jobId: bigint) =>
        committed.find((log) => log.args.jobId === jobId)?.transactionHash;
      expect(transactionOf(first.jobId)).toBeDefined();
      expect(transactionOf(second.jobId)).toBe(transactionOf(first.jobId));
    } finally {
      await single.worker.stop();
      await removeDataDir(single.dataDir);
    }
  });
});
