import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { Wallet, getBytes, hexlify, verifyMessage } from 'ethers';
import {
  AnswerFrameKind,
  encryptAnswerFrame,
  finalAnswerDigest,
  generateReplyKey,
  isFinalAnswerSignedBy,
} from '@svc/chain';
import { createLogger, retryDelayMs } from '@svc/platform';
import { waitUntil } from '@svc/testkit';
import {
  HintOutcome,
  JobErrorReason,
  LinkRefusalReason,
} from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { FinalAnswerJournal, type SignedFinalAnswer } from '../../src/jobs/final-answer-journal.js';
import { linkBackoff, WorkerLink } from '../../src/link/worker-link.js';
import { TestLinkServer, type ChallengeInit as Challenge } from '../support/test-link-server.js';
import { makeDataDir, removeDataDir } from '../support/worker-harness.js';

const JOB_REGISTRY = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const CHAIN_ID = 31337n;
const logger = createLogger({ service: 'worker-link-test', level: 'fatal' });

let server: TestLinkServer;
let link: WorkerLink | undefined;
let dataDir: string;
let journal: FinalAnswerJournal;
const wallet = Wallet.createRandom();
const hints: string[] = [];

beforeEach(async () => {
  server = new TestLinkServer(CHAIN_ID, JOB_REGISTRY);
  await server.start();
  dataDir = await makeDataDir();
  journal = new FinalAnswerJournal(dataDir);
  hints.length = 0;
});

afterEach(async () => {
  await link?.stop();
  link = undefined;
  await server.stop();
  await removeDataDir(dataDir);
});

function startLink(overrides: { chainId?: bigint } = {}): WorkerLink {
  link = new WorkerLink({
    target: server.target,
    worker: wallet.address,
    signer: wallet,
    chainId: overrides.chainId ?? CHAIN_ID,
    jobRegistry: JOB_REGISTRY,
    offer: () => ({
      models: ['svc-deterministic:1'],
      freeJobSlots: 3,
      freeSessionSlots: 5,
      heldSessions: [7n],
    }),
    hints: {
      sessionOpened: async (sessionId) => {
        hints.push(`session ${sessionId}`);
        return sessionId !== 13n;
      },
      jobSubmitted: async (jobId, sessionId, blockNumber) => {
        hints.push(`job ${jobId} in ${sessionId} at ${blockNumber}`);
        return true;
      },
    },
    journal,
    backoff: linkBackoff(20, 100),
    defaultHeartbeatMs: 1_000,
    software: 'svc-worker/test',
    logger,
  });
  link.start();
  return link;
}

function savedFinal(jobId: bigint, committed: boolean): SignedFinalAnswer {
  return {
    jobId,
    attempt: 1,
    sessionId: 4n,
    seq: 2,
    frame: new Uint8Array([1, 2, 3]),
    signature: '0x' + '11'.repeat(65),
    commitHash: '0x' + '22'.repeat(32),
    deadline: 0,
    committed,
    acknowledged: false,
  };
}

describe('WorkerLink', () => {
  it('proves its address with the signed challenge, then heartbeats its offer', async () => {
    const active = startLink();
    await waitUntil(
      async () => server.framesOf('heartbeat').length,
      (count) => count >= 2,
      { what: 'two heartbeats', timeoutMs: 5_000 },
    );
    expect(server.verifiedWorkers).toEqual([wallet.address]);
    expect(server.framesOf('hello')[0]).toMatchObject({
      worker: { hex: wallet.address },
      protocolVersion: 2,
    });
    expect(server.framesOf('heartbeat')[0]).toMatchObject({
      models: ['svc-deterministic:1'],
      freeJobSlots: 3,
      freeSessionSlots: 5,
      heldSessionIds: ['7'],
      heldSessionsListed: true,
    });
    expect(active.connected).toBe(true);
  });

  it('streams chunks, finals and job errors once welcomed', async () => {
    const active = startLink();
    await waitUntil(async () => active.connected, Boolean, { what: 'the link connected', timeoutMs: 5_000 });
    active.sendDelta({ jobId: 9n, attempt: 1, seq: 1, frame: new Uint8Array([7]) });
    active.sendFinal(savedFinal(9n, false));
    active.sendError(10n, 2, 'wrong_model');
    await waitUntil(
      async () => server.framesOf('jobError').length,
      (count) => count === 1,
      { what: 'the job error', timeoutMs: 5_000 },
    );
    expect(server.framesOf('chunk')).toEqual([
      expect.objectContaining({ jobId: '9', attempt: 1, seq: 1, sealedDelta: new Uint8Array([7]) }),
    ]);
    expect(server.framesOf('finalAnswer')[0]).toMatchObject({ jobId: '9', attempt: 1, seq: 2 });
    expect(server.framesOf('finalAnswer')[0]!.workerSignature).toHaveLength(65);
    expect(server.framesOf('jobError')[0]).toMatchObject({
      jobId: '10',
      attempt: 2,
      reason: JobErrorReason.MODEL_MISMATCH,
    });
  });

  it('answers hints with an acknowledgement', async () => {
    const active = startLink();
    await waitUntil(async () => active.connected, Boolean, { what: 'the link connected', timeoutMs: 5_000 });
    server.send({ frame: { case: 'sessionOpened', value: { hintId: 'h1', sessionId: '12', model: 'm' } } });
    server.send({ frame: { case: 'sessionOpened', value: { hintId: 'h2', sessionId: '13', model: 'm' } } });
    server.send({
      frame: {
        case: 'jobSubmitted',
        value: { hintId: 'h3', jobId: '5', sessionId: '12', attempt: 1, blockNumber: 77n },
      },
    });
    await waitUntil(
      async () => server.framesOf('hintAck').length,
      (count) => count === 3,
      { what: 'three hint acknowledgements', timeoutMs: 5_000 },
    );
    const outcomes = Object.fromEntries(server.framesOf('hintAck').map((ack) => [ack.hintId, ack.outcome]));
    expect(outcomes).toEqual({
      h1: HintOutcome.ACCEPTED,
      h2: HintOutcome.DECLINED,
      h3: HintOutcome.ACCEPTED,
    });
    expect(hints.sort()).toEqual(['job 5 in 12 at 77', 'session 12', 'session 13']);
  });

  it('re-sends unacknowledged finals after a reconnect and forgets them once acknowledged as committed', async () => {
    await journal.save(savedFinal(21n, true));
    await journal.save(savedFinal(22n, false));
    const active = startLink();
    await waitUntil(
      async () => server.framesOf('finalAnswer').length,
      (count) => count === 2,
      { what: 'the two saved finals', timeoutMs: 5_000 },
    );

    server.dropAll();
    await waitUntil(
      async () => server.verifiedWorkers.length,
      (count) => count === 2,
      { what: 'the reconnect', timeoutMs: 5_000 },
    );
    await waitUntil(
      async () => server.framesOf('finalAnswer').length,
      (count) => count === 4,
      { what: 'the finals sent again', timeoutMs: 5_000 },
    );
    expect(active.connected).toBe(true);

    server.send({ frame: { case: 'finalAck', value: { jobId: '21', attempt: 1, committed: true } } });
    server.send({ frame: { case: 'finalAck', value: { jobId: '22', attempt: 1, committed: false } } });
    await waitUntil(
      () => journal.all(),
      (left) => left.length === 1,
      { what: 'the committed final out of the journal', timeoutMs: 5_000 },
    );
    expect((await journal.all()).map((answer) => answer.jobId)).toEqual([22n]);
  });

  it('redials with backoff after a refusal', async () => {
    server.refuseWith = LinkRefusalReason.NOT_ACTIVE_WORKER;
    const active = startLink();
    await waitUntil(
      async () => server.framesOf('hello').length,
      (count) => count >= 2,
      { what: 'a second hello', timeoutMs: 5_000 },
    );
    expect(active.connected).toBe(false);
    server.refuseWith = undefined;
    await waitUntil(async () => active.connected, Boolean, {
      what: 'the link connected once accepted',
      timeoutMs: 5_000,
    });
  });

  it('does not serve an orchestrator of another chain: it does not even sign its challenge', async () => {
    startLink({ chainId: 1n });
    await waitUntil(
      async () => server.framesOf('hello').length,
      (count) => count >= 2,
      { what: 'a second dial', timeoutMs: 5_000 },
    );
    expect(server.framesOf('challengeResponse')).toHaveLength(0);
    expect(server.framesOf('heartbeat')).toHaveLength(0);
  });
});

describe('a rogue orchestrator', () => {
  // The audit's attack: the worker signed whatever challenge text it was sent with personal_sign, so a
  // challenge whose bytes were a dispute digest became a "signed final" that took the worker's stake.
  // Now it signs only EIP-712 LinkChallenge typed data it builds itself, after checking the fields.
  const answerBinding = {
    chainId: CHAIN_ID,
    jobRegistry: JOB_REGISTRY,
    jobId: 5n,
    attempt: 1,
    sessionId: 3n,
  };
  const finalFrame = encryptAnswerFrame(AnswerFrameKind.Final, 'an honest answer', generateReplyKey(), {
    jobId: 5n,
    attempt: 1,
    seq: 1,
  });

  async function refusedChallenge(rewrite: (challenge: Challenge) => Challenge): Promise<void> {
    server.rewriteChallenge = rewrite;
    startLink();
    await waitUntil(
      async () => server.framesOf('hello').length,
      (count) => count >= 2,
      { what: 'the worker redialling after refusing to sign', timeoutMs: 5_000 },
    );
    expect(server.framesOf('challengeResponse')).toHaveLength(0);
    expect(link!.connected).toBe(false);
  }

  it.each([
    ['another chain', (c: Challenge) => ({ ...c, chainId: 1n })],
    [
      'another JobRegistry',
      (c: Challenge) => ({ ...c, jobRegistry: { hex: Wallet.createRandom().address } }),
    ],
    ['another worker', (c: Challenge) => ({ ...c, worker: { hex: Wallet.createRandom().address } })],
    ['an expired challenge', (c: Challenge) => ({ ...c, expiresAt: { seconds: 1n, nanos: 0 } })],
    [
      'a challenge valid for a day',
      (c: Challenge) => ({
        ...c,
        expiresAt: { seconds: BigInt(Math.floor(Date.now() / 1000) + 86_400), nanos: 0 },
      }),
    ],
    ['a nonce that is not 32 bytes', (c: Challenge) => ({ ...c, nonce: { hex: '0x1234' } })],
    [
      'an orchestrator name that is a text to sign',
      (c: Challenge) => ({ ...c, orchestrator: 'Sign in\nNonce: 1' }),
    ],
    ['a challenge with no fields (a version 1 text challenge)', () => ({})],
  ])('gets no signature for %s', async (_what, rewrite) => {
    await refusedChallenge(rewrite);
  });

  it('gets a signature for a challenge whose nonce is a dispute digest, which is no signed final', async () => {
    const digest = finalAnswerDigest(answerBinding, finalFrame);
    server.rewriteChallenge = (c) => ({ ...c, nonce: { hex: digest } });
    const active = startLink();
    await waitUntil(async () => active.connected, Boolean, { what: 'the link connected', timeoutMs: 5_000 });
    const [response] = server.framesOf('challengeResponse');
    const signature = hexlify(response!.signature);
    expect(isFinalAnswerSignedBy(wallet.address, answerBinding, finalFrame, signature)).toBe(false);
    // Nor is it a personal_sign of the digest, the format disputeMismatch took before.
    expect(verifyMessage(getBytes(digest), signature)).not.toBe(wallet.address);
  });
});

describe('linkBackoff', () => {
  it('grows exponentially up to the ceiling, with full jitter', () => {
    const policy = linkBackoff(100, 1_000);
    expect([1, 2, 3, 4, 5, 11].map((attempt) => retryDelayMs(policy, attempt, () => 0))).toEqual([
      100, 200, 400, 800, 1_000, 1_000,
    ]);
    expect(retryDelayMs(policy, 4, () => 1)).toBe(0);
  });
});
