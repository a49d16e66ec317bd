import { randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { create, toBinary } from '@bufbuild/protobuf';
import {
  AnswerFrameKind,
  JobState,
  encryptAnswerFrame,
  responseHashOf,
  signFinalAnswer,
  type Job,
} from '@svc/chain';
import { Wallet, getBytes, type HDNodeWallet } from 'ethers';
import { createLogger, MemoryStore } from '@svc/platform';
import { ConnectRequestSchema, type FinalAnswer } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { AnswerRelay } from '../../src/completions/answer-relay.js';
import { jobFrameStreamKey } from '../../src/link/answer-frame-intake.js';

// The relay against the in-memory store's frame streams: how an attempt's end is judged from the final
// frame and the job read from the chain (faked).

const logger = createLogger({ service: 'relay-test', level: 'silent' });
const JOB_ID = 7n;

/** A job as the fakes read it, with the hash its worker committed (on chain: in its `JobCompleted`). */
type FakeJob = Partial<Job> & { readonly responseHash?: string };
const fakeJob = (fields: FakeJob) => fields as Job;

/** A relay over the store's frame streams, reading the job (faked) with `readJob`; the chain's clock at 0. */
function relayOn(store: MemoryStore, readJob: () => Promise<Job>, pollIntervalMs = 10): AnswerRelay {
  return new AnswerRelay({
    frames: store.frames,
    readJob,
    readCommitment: async (job: FakeJob) =>
      job.responseHash === undefined
        ? undefined
        : {
            responseHash: job.responseHash,
            transactionHash: '0x',
            blockNumber: 1,
          },
    chainNow: async () => 0,
    pollIntervalMs,
    finalGraceMs: 50,
    frameStreamTtlMs: 1_000,
    logger,
  });
}

async function relayed(sealedAnswer: Uint8Array, replyKey: Uint8Array, otherReplyKeys?: Uint8Array[]) {
  const store = new MemoryStore();
  const final = create(ConnectRequestSchema, {
    frame: {
      case: 'finalAnswer',
      value: {
        jobId: JOB_ID.toString(),
        attempt: 1,
        seq: 0,
        sealedAnswer,
        workerSignature: new Uint8Array(65),
      },
    },
  });
  await store.frames.append(jobFrameStreamKey(JOB_ID), 'final-1', toBinary(ConnectRequestSchema, final));
  const job = fakeJob({ state: JobState.Completed, attempt: 1, responseHash: responseHashOf(sealedAnswer) });
  const relay = relayOn(store, async () => job);
  try {
    return await relay.follow(
      { jobId: JOB_ID, attempt: 1, replyKey, ...(otherReplyKeys ? { otherReplyKeys } : {}) },
      () => undefined,
    );
  } finally {
    await store.close();
  }
}

describe('the answer relay', () => {
  it('delivers a committed final that decrypts', async () => {
    const replyKey = randomBytes(32);
    const sealed = encryptAnswerFrame(AnswerFrameKind.Final, 'the answer', replyKey, {
      jobId: JOB_ID,
      attempt: 1,
      seq: 0,
    });
    expect(await relayed(sealed, replyKey)).toMatchObject({ kind: 'committed', text: 'the answer' });
  });

  it('a committed final that does not decrypt is undelivered (refunded), not an unexpected failure', async () => {
    const sealed = encryptAnswerFrame(AnswerFrameKind.Final, 'sealed to another key', randomBytes(32), {
      jobId: JOB_ID,
      attempt: 1,
      seq: 0,
    });
    expect(await relayed(sealed, randomBytes(32))).toMatchObject({
      kind: 'undelivered',
      reason: 'the committed final answer does not decrypt',
    });
  });

  it("opens a resent payment's job with the earlier call's reply key it was sealed with", async () => {
    const firstCallKey = randomBytes(32);
    const sealed = encryptAnswerFrame(AnswerFrameKind.Final, 'answer to the first call', firstCallKey, {
      jobId: JOB_ID,
      attempt: 1,
      seq: 0,
    });
    expect(await relayed(sealed, randomBytes(32), [randomBytes(32), firstCallKey])).toMatchObject({
      kind: 'committed',
      text: 'answer to the first call',
    });
  });
});

const REGISTRY = '0x00000000000000000000000000000000000000dd';

/** A final signed by `signer` and a relay following it with `signedBy` naming `worker`. */
async function followedSigned(signer: HDNodeWallet, worker: string, sessionId: bigint, state: JobState) {
  const replyKey = randomBytes(32);
  const position = { jobId: JOB_ID, attempt: 1, seq: 0 };
  const sealedAnswer = encryptAnswerFrame(AnswerFrameKind.Final, 'the answer', replyKey, position);
  const binding = { chainId: 31337n, jobRegistry: REGISTRY, jobId: JOB_ID, attempt: 1, sessionId: 3n };
  const workerSignature = getBytes(await signFinalAnswer(signer, binding, sealedAnswer));
  const store = new MemoryStore();
  const final = create(ConnectRequestSchema, {
    frame: {
      case: 'finalAnswer',
      value: { jobId: JOB_ID.toString(), attempt: 1, seq: 0, sealedAnswer, workerSignature },
    },
  });
  await store.frames.append(jobFrameStreamKey(JOB_ID), 'final-1', toBinary(ConnectRequestSchema, final));
  const reads: JobState[] = [];
  const job = fakeJob({ state, attempt: 1, responseHash: responseHashOf(sealedAnswer), deadline: 10 });
  const relay = relayOn(store, async () => (reads.push(job.state), job));
  try {
    const signedBy = { worker, sessionId, chainId: 31337n, jobRegistry: REGISTRY };
    const outcome = await relay.follow({ jobId: JOB_ID, attempt: 1, replyKey, signedBy }, () => undefined);
    return { outcome, reads };
  } finally {
    await store.close();
  }
}

describe('the answer relay on the signed final', () => {
  it("ends on the session worker's signed final before any commitment, without reading the chain", async () => {
    const worker = Wallet.createRandom();
    const { outcome, reads } = await followedSigned(worker, worker.address, 3n, JobState.Submitted);
    expect(outcome).toMatchObject({ kind: 'signed', text: 'the answer' });
    expect(reads).toEqual([]);
  });

  it('a final signed by another key, or for another session, waits for the commitment as before', async () => {
    const worker = Wallet.createRandom();
    const other = await followedSigned(Wallet.createRandom(), worker.address, 3n, JobState.Completed);
    expect(other.outcome).toMatchObject({ kind: 'committed', text: 'the answer' });
    const elsewhere = await followedSigned(worker, worker.address, 4n, JobState.Completed);
    expect(elsewhere.outcome).toMatchObject({ kind: 'committed' });
    expect(elsewhere.reads.length).toBeGreaterThan(0);
  });

  it('checks the commitment against the signed final in hand when the store lost its frames', async () => {
    const replyKey = randomBytes(32);
    const seal = (text: string) =>
      encryptAnswerFrame(AnswerFrameKind.Final, text, replyKey, { jobId: JOB_ID, attempt: 1, seq: 0 });
    const signedFinal = create(ConnectRequestSchema, {
      frame: {
        case: 'finalAnswer',
        value: {
          jobId: JOB_ID.toString(),
          attempt: 1,
          seq: 0,
          sealedAnswer: seal('the answer'),
          workerSignature: new Uint8Array(65),
        },
      },
    }).frame.value as FinalAnswer;
    const followCommitted = async (committed: Uint8Array, frames: Uint8Array[] = []) => {
      // A store that lost the job's frames (a Redis restart), or holds another final the worker sent later.
      const store = new MemoryStore();
      for (const [index, sealedAnswer] of frames.entries()) {
        const frame = create(ConnectRequestSchema, {
          frame: { case: 'finalAnswer', value: { ...signedFinal, sealedAnswer } },
        });
        await store.frames.append(
          jobFrameStreamKey(JOB_ID),
          `final-${index}`,
          toBinary(ConnectRequestSchema, frame),
        );
      }
      const job = fakeJob({ state: JobState.Completed, attempt: 1, responseHash: responseHashOf(committed) });
      const relay = relayOn(store, async () => job);
      try {
        return await relay.follow({ jobId: JOB_ID, attempt: 1, replyKey, signedFinal }, () => undefined);
      } finally {
        await store.close();
      }
    };
    // Without the final in hand this was `undelivered` after the grace, and a delivered answer was refunded.
    expect(await followCommitted(signedFinal.sealedAnswer)).toMatchObject({
      kind: 'committed',
      text: 'the answer',
    });
    const other = seal('another answer');
    expect(await followCommitted(other)).toMatchObject({ kind: 'mismatch', final: signedFinal });
    // A later final frame does not replace the one the caller was given.
    expect(await followCommitted(signedFinal.sealedAnswer, [other])).toMatchObject({ kind: 'committed' });
    expect(await followCommitted(other, [other])).toMatchObject({ kind: 'mismatch', final: signedFinal });
  });

  it("looks for a signed final's commitment once a poll interval: its caller has the answer already", async () => {
    const replyKey = randomBytes(32);
    const sealedAnswer = encryptAnswerFrame(AnswerFrameKind.Final, 'the answer', replyKey, {
      jobId: JOB_ID,
      attempt: 1,
      seq: 0,
    });
    const signedFinal = { jobId: JOB_ID.toString(), attempt: 1, seq: 0, sealedAnswer } as FinalAnswer;
    const store = new MemoryStore();
    // Submitted for a second (the worker's commitment on its way), then committed.
    const committedAt = Date.now() + 1_000;
    let reads = 0;
    const relay = relayOn(
      store,
      async () => {
        reads += 1;
        return Date.now() < committedAt
          ? fakeJob({ state: JobState.Submitted, attempt: 1, deadline: 2 ** 40 })
          : fakeJob({ state: JobState.Completed, attempt: 1, responseHash: responseHashOf(sealedAnswer) });
      },
      250,
    );
    try {
      const outcome = await relay.follow(
        { jobId: JOB_ID, attempt: 1, replyKey, signedFinal },
        () => undefined,
      );
      expect(outcome).toMatchObject({ kind: 'committed', text: 'the answer' });
    } finally {
      await store.close();
    }
    // Every 250 ms: 5 or 6 reads (every 50 ms it was about 20, each with a read of the chain's clock).
    expect(reads).toBeGreaterThanOrEqual(4);
    expect(reads).toBeLessThanOrEqual(7);
  });
});
