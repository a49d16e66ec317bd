// Many jobs in one transaction (docs/protocol.md, Batches): submissions sharing a transaction and its
// blobs, commitments sharing a transaction, each call standing or failing on its own.
import { describe, expect, it } from '@jest/globals';
import { concat, hexlify, keccak256, parseEther, toUtf8Bytes, ZeroAddress, ZeroHash } from 'ethers';
import { sendWithBlobs } from '@svc/anvil';
import { jobRegistryInterface } from '../src/connect.js';
import { decodeRevertData } from '../src/errors.js';
import { JobState } from '../src/states.js';
import type { Actor } from './support/chain.js';
import { useChain } from './support/chain.js';
import { RESPONSE } from './support/jobs.js';
import { expectRevert } from './support/revert.js';
import { signFinalAnswer } from './support/signatures.js';
import {
  DEPLOY_CONFIG,
  DEPOSIT,
  MODEL,
  callWithBlobs,
  eventsOf,
  fundUserForService,
  mined,
  openActiveSession,
  plain,
  registerWorker,
} from './support/scenario.js';

const FEE = MODEL.feeWei;
const DISPUTE_WINDOW = 900;

describe('batch', () => {
  const chain = useChain(DEPLOY_CONFIG, async (c) => {
    await registerWorker(c, 'worker');
    await registerWorker(c, 'otherWorker');
    await fundUserForService(c, 'user');
    await fundUserForService(c, 'otherUser');
  });

  const submission = (payer: Actor, sessionId: bigint, jobId: bigint, blobIndex = 0, promptIndex = 0) =>
    jobRegistryInterface.encodeFunctionData('submitJobFor', [
      chain().address[payer],
      sessionId,
      jobId,
      FEE,
      blobIndex,
      promptIndex,
    ]);

  /** Sends `batch(calls)` as `actor` with `blobs` blobs; returns the receipt, the blobs' versioned hashes
   * and the calls that failed, decoded from `BatchCallFailed`. */
  async function sendBatch(actor: Actor, calls: string[], blobs = 0) {
    const data = jobRegistryInterface.encodeFunctionData('batch', [calls]);
    const to = chain().deployment.jobRegistryAddress;
    const response =
      blobs === 0
        ? await chain().signers[actor].sendTransaction({ to, data })
        : await sendWithBlobs(chain().signers[actor], { to, data }, blobs);
    const receipt = (await response.wait())!;
    const failed = eventsOf(receipt, 'BatchCallFailed').map((event) => ({
      index: event.index as bigint,
      error: decodeRevertData(event.reason as string),
    }));
    return { receipt, versionedHashes: response.blobVersionedHashes ?? [], failed };
  }

  const job = async (jobId: bigint) => plain(await chain().jobs('stranger').getJob(jobId));
  const balance = (actor: Actor) => chain().jobs('stranger').prepaidBalanceOf(chain().address[actor]);
  const nextJobId = (sessionId: bigint) => chain().jobs('stranger').nextJobId(sessionId);

  it('submits jobs of several payers, sessions and workers in one transaction, their prompts sharing its blobs', async () => {
    const { address } = chain();
    const first = await openActiveSession(chain(), { owner: 'service', worker: 'worker' });
    const second = await openActiveSession(chain(), { owner: 'service', worker: 'otherWorker' });
    const ids = [(first << 32n) | 1n, (second << 32n) | 1n, (first << 32n) | 2n];
    const { receipt, versionedHashes, failed } = await sendBatch(
      'service',
      [
        submission('user', first, ids[0]!, 0, 0),
        submission('otherUser', second, ids[1]!, 0, 1),
        submission('otherUser', first, ids[2]!, 1, 0),
      ],
      2,
    );
    expect(failed).toEqual([]);
    expect(eventsOf(receipt, 'JobSubmitted').map((event) => event.toObject())).toEqual([
      {
        jobId: ids[0],
        sessionId: first,
        payer: address.user,
        worker: address.worker,
        fee: FEE,
        promptBlobHash: versionedHashes[0],
        promptIndex: 0n,
      },
      {
        jobId: ids[1],
        sessionId: second,
        payer: address.otherUser,
        worker: address.otherWorker,
        fee: FEE,
        promptBlobHash: versionedHashes[0],
        promptIndex: 1n,
      },
      {
        jobId: ids[2],
        sessionId: first,
        payer: address.otherUser,
        worker: address.worker,
        fee: FEE,
        promptBlobHash: versionedHashes[1],
        promptIndex: 0n,
      },
    ]);
    expect(await job(ids[1]!)).toMatchObject({
      payer: address.otherUser,
      worker: address.otherWorker,
      delegate: address.service,
      sessionId: second,
      promptIndex: 1n,
      state: BigInt(JobState.Submitted),
      attempt: 1n,
    });
    expect(await job(ids[2]!)).toMatchObject({ promptIndex: 0n, commitBatch: 0n });
    expect(await balance('user')).toBe(DEPOSIT - FEE);
    expect(await balance('otherUser')).toBe(DEPOSIT - 2n * FEE);
    expect(await nextJobId(first)).toBe((first << 32n) | 3n);
  });

  it('a job that fails in a batch is undone alone, with its reason; the others land and nothing is charged for it', async () => {
    const { address } = chain();
    const sessionId = await openActiveSession(chain(), { owner: 'service' });
    // The facilitator's wallet authorized the service with no allowance: its submission reverts after
    // its balance was debited, and that debit is undone with it.
    await mined(chain().jobs('facilitator').deposit({ value: DEPOSIT }));
    await mined(chain().jobs('facilitator').setDelegateAuthorization(address.service, true));
    const stale = (sessionId << 32n) | 9n;
    const { receipt, failed } = await sendBatch(
      'service',
      [
        submission('user', sessionId, (sessionId << 32n) | 1n, 0, 0),
        submission('facilitator', sessionId, (sessionId << 32n) | 2n, 0, 1),
        submission('user', sessionId, stale, 0, 2),
        submission('user', sessionId, (sessionId << 32n) | 2n, 0, 3),
        submission('user', sessionId, (sessionId << 32n) | 3n, 3, 0),
      ],
      1,
    );
    expect(failed).toEqual([
      {
        index: 1n,
        error: {
          name: 'InsufficientAllowance',
          args: { user: address.facilitator, delegate: address.service, required: FEE, available: 0n },
        },
      },
      {
        index: 2n,
        error: {
          name: 'UnexpectedJobId',
          args: { sessionId, expected: (sessionId << 32n) | 2n, given: stale },
        },
      },
      { index: 4n, error: { name: 'BlobMissing', args: { blobIndex: 3n } } },
    ]);
    expect(eventsOf(receipt, 'JobSubmitted').map((event) => [event.jobId, event.promptIndex])).toEqual([
      [(sessionId << 32n) | 1n, 0n],
      [(sessionId << 32n) | 2n, 3n],
    ]);
    expect(await balance('facilitator')).toBe(DEPOSIT);
    expect(await balance('user')).toBe(DEPOSIT - 2n * FEE);
    expect(await job((sessionId << 32n) | 2n)).toMatchObject({ payer: address.user, promptIndex: 3n });
  });

  it('a worker commits several answers in one transaction, under one root; one it may not commit fails alone and takes no place', async () => {
    const mine = await openActiveSession(chain(), { owner: 'service', worker: 'worker' });
    const theirs = await openActiveSession(chain(), { owner: 'service', worker: 'otherWorker' });
    const ids = [(mine << 32n) | 1n, (theirs << 32n) | 1n, (mine << 32n) | 2n, (mine << 32n) | 3n];
    await sendBatch(
      'service',
      [
        submission('user', mine, ids[0]!),
        submission('user', theirs, ids[1]!, 0, 1),
        submission('user', mine, ids[2]!, 0, 2),
        submission('otherUser', mine, ids[3]!, 0, 3),
      ],
      1,
    );
    const answers = ids.map((_, index) => keccak256(toUtf8Bytes(`final ${index}`)));
    const { receipt, failed } = await sendBatch(
      'worker',
      ids.map((id, index) => jobRegistryInterface.encodeFunctionData('completeJob', [id, answers[index]])),
    );
    expect(failed.map(({ index, error }) => [index, error?.name])).toEqual([[1n, 'NotJobWorker']]);
    const completed = eventsOf(receipt, 'JobCompleted');
    expect(completed.map((event) => [event.jobId, event.responseHash])).toEqual([
      [ids[0], answers[0]],
      [ids[2], answers[2]],
      [ids[3], answers[3]],
    ]);
    const completedAt = BigInt((await chain().provider.getBlock(receipt.blockNumber))!.timestamp);
    const commitBatch = (await chain().jobs('stranger').getJob(ids[0]!)).commitBatch;
    // The answers in the order of their events, and nothing of the call that failed.
    for (const [commitIndex, id] of [ids[0]!, ids[2]!, ids[3]!].entries()) {
      expect(await job(id)).toMatchObject({
        state: BigInt(JobState.Completed),
        completedAt,
        deadline: 0n,
        commitBatch,
        commitIndex: BigInt(commitIndex),
        // The record's place now names the answer, not the prompt.
        promptIndex: 0n,
      });
    }
    expect(commitBatch).toBeGreaterThan(0n);
    let root = ZeroHash;
    for (const answer of [answers[0]!, answers[2]!, answers[3]!]) root = keccak256(concat([root, answer]));
    expect(await chain().jobs('stranger').commitRoot(commitBatch)).toBe(root);
    expect((await job(ids[1]!)).state).toBe(BigInt(JobState.Submitted));

    // The next transaction's answers make a batch of their own.
    const { receipt: next } = await sendBatch('otherWorker', [
      jobRegistryInterface.encodeFunctionData('completeJob', [ids[1]!, answers[1]]),
    ]);
    expect(eventsOf(next, 'JobCompleted')).toHaveLength(1);
    expect(await job(ids[1]!)).toMatchObject({ commitIndex: 0n });
    const otherBatch = (await chain().jobs('stranger').getJob(ids[1]!)).commitBatch;
    expect(otherBatch).not.toBe(commitBatch);
    expect(await chain().jobs('stranger').commitRoot(otherBatch)).toBe(
      keccak256(concat([ZeroHash, answers[1]!])),
    );

    // Settled as ever: released together once the dispute window has passed.
    await chain().clock.advance(DISPUTE_WINDOW + 1);
    await mined(chain().jobs('stranger').releaseJobs([ids[0]!, ids[2]!]));
    expect((await job(ids[0]!)).state).toBe(BigInt(JobState.Released));
    expect(await job(ids[0]!)).toMatchObject({ completedAt, commitBatch, commitIndex: 0n });
    expect(await chain().jobs('stranger').earningsOf(chain().address.worker)).toBeGreaterThan(0n);
  });

  it("disputes an answer committed in a shared batch with the batch's answers, and only with them", async () => {
    const sessionId = await openActiveSession(chain(), { owner: 'service', worker: 'worker' });
    const ids = [1n, 2n, 3n].map((sequence) => (sessionId << 32n) | sequence);
    await sendBatch(
      'service',
      ids.map((id, index) => submission(index === 1 ? 'otherUser' : 'user', sessionId, id, 0, index)),
      1,
    );
    const committed = ids.map((_, index) => hexlify(toUtf8Bytes(`committed final ${index}`)));
    const batchAnswers = committed.map((frame) => keccak256(frame));
    await sendBatch(
      'worker',
      ids.map((id, index) =>
        jobRegistryInterface.encodeFunctionData('completeJob', [id, batchAnswers[index]]),
      ),
    );
    // The worker signed and delivered another final for the middle job than the one it committed.
    const delivered = hexlify(toUtf8Bytes('the final the caller was given'));
    const binding = {
      chainId: chain().anvil.chainId,
      jobRegistry: chain().deployment.jobRegistryAddress,
      jobId: ids[1]!,
      attempt: 1n,
      sessionId,
    };
    const signature = await signFinalAnswer(chain().signers.worker, binding, delivered);
    const jobs = chain().jobs('service');
    const dispute = (batchGiven: string[], frame = delivered, signed = signature) =>
      jobs.disputeMismatch(ids[1]!, 1n, frame, signed, batchGiven);

    // A list that does not make the root proves nothing: one answer short, out of order, or with the
    // delivered final's hash put in the job's place.
    for (const forged of [
      batchAnswers.slice(0, 2),
      [batchAnswers[1]!, batchAnswers[0]!, batchAnswers[2]!],
      [batchAnswers[0]!, keccak256(delivered), batchAnswers[2]!],
    ]) {
      await expectRevert(dispute(forged), 'CommitBatchMismatch', {
        jobId: ids[1],
        answers: BigInt(forged.length),
      });
    }
    // The final it committed is no mismatch.
    await expectRevert(
      dispute(
        batchAnswers,
        committed[1],
        await signFinalAnswer(chain().signers.worker, binding, committed[1]!),
      ),
      'ResponseMatchesCommitment',
      { jobId: ids[1], responseHash: batchAnswers[1] },
    );
    const before = await balance('otherUser');
    const receipt = await mined(dispute(batchAnswers));
    expect(eventsOf(receipt, 'JobDisputed').map((event) => event.jobId)).toEqual([ids[1]]);
    expect(await balance('otherUser')).toBeGreaterThan(before + FEE);
    // The batch's other jobs stand.
    expect((await job(ids[0]!)).state).toBe(BigInt(JobState.Completed));
    expect((await job(ids[2]!)).state).toBe(BigInt(JobState.Completed));
    expect(await job(ids[1]!)).toMatchObject({ state: BigInt(JobState.Refunded), failedAt: 0n });
  });

  it('reassigns a failed job out of a shared blob; the jobs left in that blob keep it', async () => {
    const { address } = chain();
    const first = await openActiveSession(chain(), { owner: 'service', worker: 'worker' });
    const ids = [(first << 32n) | 1n, (first << 32n) | 2n];
    const { receipt: submitted, versionedHashes: shared } = await sendBatch(
      'service',
      [submission('user', first, ids[0]!, 0, 0), submission('otherUser', first, ids[1]!, 0, 1)],
      1,
    );
    expect(eventsOf(submitted, 'JobSubmitted').map((event) => event.promptBlobHash)).toEqual([
      shared[0],
      shared[0],
    ]);
    await mined(chain().jobs('worker').failJob(ids[0]!));
    const retry = await openActiveSession(chain(), { owner: 'service', worker: 'otherWorker' });
    const { receipt, versionedHashes } = await callWithBlobs(
      chain(),
      'service',
      'reassignJob',
      [ids[0]!, retry],
      2,
      { blobIndex: 1, promptIndex: 4 },
    );
    // The new prompt's blob is named by the reassignment's event; the job records the prompt's place.
    expect(
      eventsOf(receipt, 'JobReassigned').map((event) => [event.promptBlobHash, event.promptIndex]),
    ).toEqual([[versionedHashes[1], 4n]]);
    expect(await job(ids[0]!)).toMatchObject({
      sessionId: retry,
      worker: address.otherWorker,
      promptIndex: 4n,
      attempt: 2n,
      state: BigInt(JobState.Submitted),
    });
    expect(await job(ids[1]!)).toMatchObject({
      sessionId: first,
      worker: address.worker,
      promptIndex: 1n,
      attempt: 1n,
    });
    // Each job is answered by its own session's worker, and only by it.
    await expectRevert(chain().jobs('worker').completeJob(ids[0]!, RESPONSE), 'NotJobWorker');
    await mined(chain().jobs('otherWorker').completeJob(ids[0]!, RESPONSE));
    await mined(chain().jobs('worker').completeJob(ids[1]!, RESPONSE));
  });

  it("keeps each job's payer and delegate apart (a job names them by account id): reads and refunds find the right ones", async () => {
    const { address } = chain();
    // A second service: the user lets it spend too, and it submits into its own session.
    const SECOND_ALLOWANCE = parseEther('0.5');
    await mined(chain().jobs('user').setDelegateAuthorization(address.facilitator, true));
    await mined(chain().jobs('user').setDelegateAllowance(address.facilitator, SECOND_ALLOWANCE));
    const ours = await openActiveSession(chain(), { owner: 'service', worker: 'worker' });
    const theirs = await openActiveSession(chain(), { owner: 'facilitator', worker: 'otherWorker' });
    const own = await openActiveSession(chain(), { owner: 'otherUser', worker: 'worker' });
    const ids = {
      userByService: (ours << 32n) | 1n,
      otherUserByService: (ours << 32n) | 2n,
      userByFacilitator: (theirs << 32n) | 1n,
      otherUserItself: (own << 32n) | 1n,
    };
    await sendBatch('facilitator', [submission('user', theirs, ids.userByFacilitator)], 1);
    await sendBatch(
      'service',
      [
        submission('user', ours, ids.userByService),
        submission('otherUser', ours, ids.otherUserByService, 0, 1),
      ],
      1,
    );
    await callWithBlobs(chain(), 'otherUser', 'submitJobFor', [address.otherUser, own, FEE], 1);

    const expected = [
      [ids.userByService, address.user, address.service],
      [ids.otherUserByService, address.otherUser, address.service],
      [ids.userByFacilitator, address.user, address.facilitator],
      [ids.otherUserItself, address.otherUser, ZeroAddress],
    ] as const;
    for (const [id, payer, delegate] of expected) {
      expect(await job(id)).toMatchObject({ payer, delegate, fee: FEE, state: BigInt(JobState.Submitted) });
    }
    const allowance = (delegate: Actor) =>
      chain().jobs('stranger').delegateAllowance(address.user, address[delegate]);
    const serviceAllowance = await allowance('service');
    expect(await allowance('facilitator')).toBe(SECOND_ALLOWANCE - FEE);

    // Refunded, each fee goes back to its own payer and allowance.
    await mined(chain().jobs('worker').failJob(ids.userByService));
    await mined(chain().jobs('worker').failJob(ids.otherUserByService));
    await mined(chain().jobs('otherWorker').failJob(ids.userByFacilitator));
    await mined(chain().jobs('worker').failJob(ids.otherUserItself));
    await mined(chain().jobs('facilitator').refundJob(ids.userByFacilitator));
    expect(await balance('user')).toBe(DEPOSIT - FEE);
    expect(await allowance('facilitator')).toBe(SECOND_ALLOWANCE);
    expect(await allowance('service')).toBe(serviceAllowance);
    await mined(chain().jobs('service').refundJob(ids.userByService));
    await mined(chain().jobs('service').refundJob(ids.otherUserByService));
    await mined(chain().jobs('otherUser').refundJob(ids.otherUserItself));
    expect(await balance('user')).toBe(DEPOSIT);
    expect(await balance('otherUser')).toBe(DEPOSIT);
    expect(await allowance('service')).toBe(serviceAllowance + FEE);
  });

  it('takes no ether, so no call in it can count a value twice', async () => {
    const data = jobRegistryInterface.encodeFunctionData('batch', [
      [
        jobRegistryInterface.encodeFunctionData('deposit'),
        jobRegistryInterface.encodeFunctionData('deposit'),
      ],
    ]);
    await expect(
      chain().signers.user.sendTransaction({
        to: chain().deployment.jobRegistryAddress,
        data,
        value: parseEther('0.1'),
      }),
    ).rejects.toThrow();
    expect(await balance('user')).toBe(DEPOSIT);
  });
});
