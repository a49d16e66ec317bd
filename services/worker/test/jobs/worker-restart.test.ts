import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { access, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  AnswerFrameKind,
  JobState,
  SessionState,
  decryptAnswerFrame,
  encryptAnswerFrame,
  responseHashOf,
  signFinalAnswer,
} from '@svc/chain';
import { useDevnet, waitUntil } from '@svc/testkit';
import { FinalAnswerJournal } from '../../src/jobs/final-answer-journal.js';
import { deterministicAnswer } from '../../src/model/index.js';
import { DEPLOYED_MODELS, MODEL } from '../support/models.js';
import { ServiceSide } from '../support/service-side.js';
import {
  fundedWorkerWallet,
  makeDataDir,
  removeDataDir,
  startTestWorker,
  type TestWorker,
} from '../support/worker-harness.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, protocol: { jobTimeoutSeconds: 30 } });
let service: ServiceSide;
let current: TestWorker | undefined;
let dataDir: string;

beforeAll(async () => {
  const net = devnet();
  service = new ServiceSide(net.wallet(3), net.deployment, BigInt(net.anvil.chainId));
  await service.deposit();
  dataDir = await makeDataDir();
}, 60_000);

afterAll(async () => {
  await current?.worker.stop();
  await removeDataDir(dataDir);
});

function ask(content: string) {
  return { kind: 'prompt' as const, messages: [{ role: 'user' as const, content }] };
}

describe('restart recovery', () => {
  it('keeps session keys across a restart, encrypted at rest, until the session closes', async () => {
    const net = devnet();
    const wallet = await fundedWorkerWallet(net);
    current = await startTestWorker(net, { wallet, dataDir });
    expect(current.worker.registration.steps).toEqual(['registered']);
    const sessionId = await service.openSession(current.worker.address, MODEL.name);
    await service.waitForClaim(sessionId);
    await current.worker.stop();

    current = await startTestWorker(net, { wallet, dataDir });
    expect(current.worker.registration.steps).toEqual([]);
    const job = await service.submitJob(sessionId, MODEL.name, ask('after a restart'));
    expect((await service.waitForOutcome(job.jobId)).state).toBe(JobState.Completed);
    const final = current.channel.finalOf(job.jobId)!;
    const text = decryptAnswerFrame(AnswerFrameKind.Final, final.frame, job.replyKey, {
      jobId: job.jobId,
      attempt: 1,
      seq: final.seq,
    });
    expect(text).toBe(deterministicAnswer(job.messages));

    const keyFile = join(dataDir, 'session-keys', `${sessionId}.session-key.json`);
    const sealed = await readFile(keyFile, 'utf8');
    expect(JSON.parse(sealed)).toEqual({ v: 1, sessionId: sessionId.toString(), sealed: expect.any(String) });

    await service.closeSession(sessionId);
    await waitUntil(
      () =>
        readFile(keyFile).then(
          () => true,
          () => false,
        ),
      (exists) => !exists,
      { what: 'the session key file deleted', timeoutMs: 5_000 },
    );
    expect(current.worker.status().heldSessions).toBe(0);
  });

  it('commits a final saved before a crash as it is, never regenerated', async () => {
    const net = devnet();
    const worker = current!;
    const sessionId = await service.openSession(worker.worker.address, MODEL.name);
    await service.waitForClaim(sessionId);
    await worker.worker.stop();

    const job = await service.submitJob(sessionId, MODEL.name, ask('what did you say before?'));
    const onChain = await service.chain.getJob(job.jobId);
    // What a worker that crashed right after saving its final would have left behind.
    const frame = encryptAnswerFrame(
      AnswerFrameKind.Final,
      'the answer saved before the crash',
      job.replyKey,
      {
        jobId: job.jobId,
        attempt: 1,
        seq: 0,
      },
    );
    const binding = {
      chainId: BigInt(net.anvil.chainId),
      jobRegistry: net.deployment.jobRegistryAddress,
      jobId: job.jobId,
      attempt: 1,
      sessionId,
    };
    await new FinalAnswerJournal(join(dataDir, 'final-answers')).save({
      jobId: job.jobId,
      attempt: 1,
      sessionId,
      seq: 0,
      frame,
      signature: await signFinalAnswer(worker.wallet, binding, frame),
      commitHash: responseHashOf(frame),
      deadline: onChain.deadline,
      committed: false,
      acknowledged: false,
    });

    current = await startTestWorker(net, { wallet: worker.wallet, dataDir });
    const completed = await service.waitForOutcome(job.jobId);
    expect(completed.state).toBe(JobState.Completed);
    expect(await service.committedHash(completed)).toBe(responseHashOf(frame));
    expect(current.channel.deltasOf(job.jobId)).toHaveLength(0);
  });

  it('serves nothing twice when it reads the whole chain again', async () => {
    const net = devnet();
    const worker = current!;
    await worker.worker.stop();
    await rm(join(dataDir, 'chain-cursor.json'));
    const nonceBefore = await net.provider.getTransactionCount(worker.worker.address);
    current = await startTestWorker(net, { wallet: worker.wallet, dataDir });
    await current.worker.follower.pollOnce();
    // Let every handler the replay started finish.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await net.provider.getTransactionCount(worker.worker.address)).toBe(nonceBefore);
    expect(current.channel.finals).toHaveLength(0);
  });

  it('forgets the keys of sessions that closed while it was down', async () => {
    const net = devnet();
    const worker = current!;
    const sessionId = await service.openSession(worker.worker.address, MODEL.name);
    await service.waitForClaim(sessionId);
    await worker.worker.stop();
    await service.closeSession(sessionId);
    expect((await service.chain.getSession(sessionId)).state).toBe(SessionState.Closed);
    const keyFile = join(dataDir, 'session-keys', `${sessionId}.session-key.json`);
    expect(await exists(keyFile)).toBe(true);
    const heldBefore = worker.worker.status().heldSessions;
    current = await startTestWorker(net, { wallet: worker.wallet, dataDir });
    expect(await exists(keyFile)).toBe(false);
    expect(current.worker.status().heldSessions).toBe(heldBefore - 1);
  });
});

function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
