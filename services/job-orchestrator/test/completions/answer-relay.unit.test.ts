import { randomBytes } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { create, toBinary } from '@bufbuild/protobuf';
import { AnswerFrameKind, JobState, encryptAnswerFrame, responseHashOf, type Job } from '@svc/chain';
import { createLogger, MemoryStore } from '@svc/platform';
import { ConnectRequestSchema } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { AnswerRelay } from '../../src/completions/answer-relay.js';
import { jobFrameStreamKey } from '../../src/link/answer-frame-intake.js';

// The relay against the in-memory store's frame streams: how an attempt's end is judged from the final
// frame and the job read from the chain (faked).

const logger = createLogger({ service: 'relay-test', level: 'silent' });
const JOB_ID = 7n;

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
  const job = { state: JobState.Completed, attempt: 1, responseHash: responseHashOf(sealedAnswer) } as Job;
  const relay = new AnswerRelay({
    frames: store.frames,
    readJob: async () => job,
    chainNow: async () => 0,
    pollIntervalMs: 10,
    finalGraceMs: 50,
    frameStreamTtlMs: 1_000,
    logger,
  });
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
