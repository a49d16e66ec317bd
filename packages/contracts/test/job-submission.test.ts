import { describe, expect, it } from '@jest/globals';
import { parseEther, ZeroAddress } from 'ethers';
import { JobState, SessionState } from '../src/states.js';
import { useChain } from './support/chain.js';
import { expectRevert } from './support/revert.js';
import {
  DEPLOY_CONFIG,
  DEPOSIT,
  MODEL,
  callWithBlobs,
  eventOf,
  fundUserForService,
  mined,
  plain,
  openActiveSession,
  openSession,
  registerWorker,
  SPEND_CUT_DELAY,
  submitJob,
  withdrawNow,
} from './support/scenario.js';

const FEE = MODEL.feeWei;

describe('submitJobFor', () => {
  const chain = useChain(DEPLOY_CONFIG, async (c) => {
    await registerWorker(c, 'worker');
    await fundUserForService(c);
  });

  it("records the blob's versioned hash, moves the fee into escrow and starts the job timeout", async () => {
    const { address, provider, deployment } = chain();
    const sessionId = await openActiveSession(chain());
    const heldBefore = await provider.getBalance(deployment.jobRegistryAddress);
    const { jobId, receipt, versionedHashes } = await submitJob(chain(), sessionId);
    const timestamp = (await provider.getBlock(receipt.blockNumber))!.timestamp;
    expect(versionedHashes).toHaveLength(1);
    expect(eventOf(receipt, 'JobSubmitted').toObject()).toEqual({
      jobId: (sessionId << 32n) | 1n,
      sessionId,
      payer: address.user,
      worker: address.worker,
      fee: FEE,
      promptBlobHash: versionedHashes[0],
      promptIndex: 0n,
    });
    const job = await chain().jobs('stranger').getJob(jobId);
    expect(plain(job)).toMatchObject({
      payer: address.user,
      worker: address.worker,
      delegate: ZeroAddress,
      sessionId,
      fee: FEE,
      promptIndex: 0n,
      deadline: BigInt(timestamp + 120),
      attempt: 1n,
      state: BigInt(JobState.Submitted),
    });
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT - FEE);
    // Escrow stays inside the contract: its ether does not move.
    expect(await provider.getBalance(deployment.jobRegistryAddress)).toBe(heldBefore);
    expect((await chain().jobs('stranger').getSession(sessionId)).lastActivityAt).toBe(BigInt(timestamp));
  });

  it("names each job by its session and the session's sequence, known before the submission is mined (docs/protocol.md test vectors)", async () => {
    const { address } = chain();
    const first = await openActiveSession(chain());
    const second = await openActiveSession(chain());
    const jobs = chain().jobs('stranger');
    expect(await jobs.nextJobId(first)).toBe((first << 32n) | 1n);
    expect((await submitJob(chain(), first)).jobId).toBe((first << 32n) | 1n);
    expect((await submitJob(chain(), second)).jobId).toBe((second << 32n) | 1n);
    expect(await jobs.nextJobId(first)).toBe((first << 32n) | 2n);
    expect((await submitJob(chain(), first)).jobId).toBe((first << 32n) | 2n);
    // The protocol's vector: session 5, third job.
    expect((5n << 32n) | 3n).toBe(0x500000003n);
    // A submission naming an id another submission took (or one ahead) reverts and charges nothing.
    const balance = await jobs.prepaidBalanceOf(address.user);
    for (const stale of [(first << 32n) | 2n, (first << 32n) | 4n, (second << 32n) | 3n]) {
      await expectRevert(
        callWithBlobs(chain(), 'user', 'submitJobFor', [address.user, first, stale, FEE]),
        'UnexpectedJobId',
        { sessionId: first, expected: (first << 32n) | 3n, given: stale },
      );
    }
    expect(await jobs.prepaidBalanceOf(address.user)).toBe(balance);
  });

  it('reverts when the transaction lacks the blob it names, and charges nothing', async () => {
    const { address } = chain();
    const sessionId = await openActiveSession(chain());
    for (const [blobs, blobIndex] of [
      [0, 0],
      [1, 1],
      [2, 2],
    ] as const) {
      await expectRevert(
        callWithBlobs(chain(), 'user', 'submitJobFor', [address.user, sessionId, FEE], blobs, { blobIndex }),
        'BlobMissing',
        { blobIndex: BigInt(blobIndex) },
      );
    }
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT);
    // Any blob of the transaction may hold the prompt: its event names the one the submission named.
    const { jobId, receipt, versionedHashes } = await submitJob(chain(), sessionId, {
      blobs: 3,
      blobIndex: 2,
      promptIndex: 7,
    });
    expect(eventOf(receipt, 'JobSubmitted').promptBlobHash).toBe(versionedHashes[2]);
    expect(plain(await chain().jobs('stranger').getJob(jobId))).toMatchObject({ promptIndex: 7n });
  });

  it('refuses a fee above maxFee; a higher maxFee still charges only the fee', async () => {
    const { address } = chain();
    const sessionId = await openActiveSession(chain());
    await expectRevert(submitJob(chain(), sessionId, { maxFee: FEE - 1n }), 'FeeAboveMax', {
      fee: FEE,
      maxFee: FEE - 1n,
    });
    await submitJob(chain(), sessionId, { maxFee: FEE * 10n });
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT - FEE);
  });

  it("a delegate's submission also spends its allowance and records the allowance epoch", async () => {
    const { address } = chain();
    const sessionId = await openActiveSession(chain(), { by: 'service' });
    await mined(chain().jobs('user').setDelegateAllowance(address.service, parseEther('0.5')));
    const { jobId } = await submitJob(chain(), sessionId, { by: 'service' });
    const jobs = chain().jobs('stranger');
    expect(await jobs.delegateAllowance(address.user, address.service)).toBe(parseEther('0.5') - FEE);
    expect(await jobs.prepaidBalanceOf(address.user)).toBe(DEPOSIT - FEE);
    const job = await jobs.getJob(jobId);
    expect(job.delegate).toBe(address.service);
    expect(job.allowanceEpoch).toBe(1n);
  });

  it('an operator of the delegate submits as the delegate', async () => {
    const { address } = chain();
    await mined(chain().jobs('service').setOperator(address.operator, true));
    await mined(chain().jobs('operator').acceptOperator(address.service));
    const sessionId = await openActiveSession(chain(), { by: 'operator' });
    const { jobId } = await submitJob(chain(), sessionId, { by: 'operator' });
    expect((await chain().jobs('stranger').getJob(jobId)).delegate).toBe(address.service);
    expect(await chain().jobs('stranger').delegateAllowance(address.user, address.service)).toBe(
      DEPOSIT - FEE,
    );
  });

  it('refuses when the balance or the allowance does not cover the fee', async () => {
    const { address } = chain();
    const sessionId = await openActiveSession(chain());
    await mined(
      chain()
        .jobs('user')
        .setDelegateAllowance(address.service, FEE - 1n),
    );
    // A cut binds the delegate once SPEND_CUT_DELAY has passed (the next case: what it spends before).
    await chain().clock.advance(SPEND_CUT_DELAY);
    await expectRevert(submitJob(chain(), sessionId, { by: 'service' }), 'InsufficientAllowance', {
      user: address.user,
      delegate: address.service,
      required: FEE,
      available: FEE - 1n,
    });
    await withdrawNow(chain(), 'user', DEPOSIT - FEE + 1n);
    await expectRevert(submitJob(chain(), sessionId), 'InsufficientBalance', {
      user: address.user,
      required: FEE,
      available: FEE - 1n,
    });
  });

  it('a withdrawal request, an allowance cut or a revocation does not make a submission signed before it fail (docs/protocol.md, Spending cuts)', async () => {
    const { address } = chain();
    const jobs = chain().jobs('stranger');
    const sessionId = await openActiveSession(chain(), { by: 'service' });
    // The wallet asks for everything back and cuts the service off, in one block before the submission.
    await mined(chain().jobs('user').requestWithdrawal(DEPOSIT));
    await mined(chain().jobs('user').setDelegateAllowance(address.service, 0n));
    // New work sees the cut at once: nothing to count on, no allowance.
    expect(await jobs.prepaidBalanceOf(address.user)).toBe(0n);
    expect(await jobs.delegateAllowance(address.user, address.service)).toBe(0n);
    expect((await jobs.delegateGrace(address.user, address.service))[0]).toBe(DEPOSIT);
    // The submission the service had already signed still lands, and is paid.
    const { jobId } = await submitJob(chain(), sessionId, { by: 'service' });
    expect((await jobs.getJob(jobId)).allowanceEpoch).toBe(2n ** 32n - 1n);
    expect((await jobs.delegateGrace(address.user, address.service))[0]).toBe(DEPOSIT - FEE);
    // Revoked too: still within the grace, another lands; then the wallet is paid what is left.
    await mined(chain().jobs('user').setDelegateAuthorization(address.service, false));
    const [, until] = await jobs.delegateGrace(address.user, address.service);
    await submitJob(chain(), sessionId, { by: 'service' });
    await expectRevert(
      chain()
        .jobs('user')
        .withdrawBalance(DEPOSIT - 2n * FEE),
      'WithdrawalNotAvailable',
    );
    await chain().clock.advance(Number(until) - (await chain().clock.now()) + 1);
    await expectRevert(submitJob(chain(), sessionId, { by: 'service' }), 'NotOwnerOrDelegate', {
      owner: address.user,
      caller: address.service,
    });
    await expectRevert(chain().jobs('user').withdrawBalance(DEPOSIT), 'InsufficientBalance', {
      available: DEPOSIT - 2n * FEE,
    });
    await mined(
      chain()
        .jobs('user')
        .withdrawBalance(DEPOSIT - 2n * FEE),
    );
    expect(await jobs.delegateGrace(address.user, address.service)).toEqual([0n, until]);
  });

  it('a grace spends no more than the allowance before the cut', async () => {
    const { address } = chain();
    const jobs = chain().jobs('stranger');
    const sessionId = await openActiveSession(chain(), { by: 'service' });
    await mined(chain().jobs('user').setDelegateAllowance(address.service, FEE));
    await chain().clock.advance(SPEND_CUT_DELAY);
    // Lowered to 0, then raised again within the grace: the two together cover one fee, not two.
    await mined(chain().jobs('user').setDelegateAllowance(address.service, 0n));
    await mined(chain().jobs('user').setDelegateAllowance(address.service, FEE));
    await submitJob(chain(), sessionId, { by: 'service' });
    expect(await jobs.delegateGrace(address.user, address.service)).toEqual([0n, expect.any(BigInt)]);
    await expectRevert(submitJob(chain(), sessionId, { by: 'service' }), 'InsufficientAllowance');
  });

  it('only the payer or its authorized delegate submits', async () => {
    const { address } = chain();
    const sessionId = await openActiveSession(chain());
    await expectRevert(submitJob(chain(), sessionId, { by: 'stranger' }), 'NotOwnerOrDelegate', {
      owner: address.user,
      caller: address.stranger,
    });
    await mined(chain().jobs('user').setDelegateAuthorization(address.service, false));
    // A revoked delegate's grace (the case above) ends SPEND_CUT_DELAY after the revocation.
    await chain().clock.advance(SPEND_CUT_DELAY);
    await expectRevert(submitJob(chain(), sessionId, { by: 'service' }), 'NotOwnerOrDelegate', {
      caller: address.service,
    });
  });

  it("a delegate submits for the payer into the delegate's own session: the payer's balance and the delegate's allowance pay, the job is the payer's", async () => {
    const { address } = chain();
    const jobs = chain().jobs('stranger');
    await mined(chain().jobs('service').setOperator(address.operator, true));
    await mined(chain().jobs('operator').acceptOperator(address.service));
    const sessionId = await openActiveSession(chain(), { owner: 'service', by: 'operator' });
    const { jobId, receipt } = await submitJob(chain(), sessionId, { by: 'operator' });
    expect(eventOf(receipt, 'JobSubmitted').payer).toBe(address.user);
    expect(plain(await jobs.getJob(jobId))).toMatchObject({
      payer: address.user,
      delegate: address.service,
      allowanceEpoch: 0n,
      sessionId,
      fee: FEE,
    });
    expect(await jobs.prepaidBalanceOf(address.user)).toBe(DEPOSIT - FEE);
    expect(await jobs.delegateAllowance(address.user, address.service)).toBe(DEPOSIT - FEE);
    expect(await jobs.prepaidBalanceOf(address.service)).toBe(0n);
  });

  it("a payer cannot submit into, or close, its delegate's session (docs/protocol.md, Sessions)", async () => {
    const { address } = chain();
    const jobs = chain().jobs('stranger');
    const sessionId = await openActiveSession(chain(), { owner: 'service' });
    const nextJobId = await jobs.nextJobId(sessionId);
    await expectRevert(submitJob(chain(), sessionId, { by: 'user' }), 'SessionOwnerMismatch', {
      sessionId,
      expected: address.service,
      actual: address.user,
    });
    // Naming the session's owner as payer does not help: the payer is no delegate of the service.
    await expectRevert(
      callWithBlobs(chain(), 'user', 'submitJobFor', [address.service, sessionId, FEE]),
      'NotOwnerOrDelegate',
      { owner: address.service, caller: address.user },
    );
    await expectRevert(chain().jobs('user').closeSession(sessionId), 'SessionNotClosable');
    expect(await jobs.nextJobId(sessionId)).toBe(nextJobId);
    expect(await jobs.prepaidBalanceOf(address.user)).toBe(DEPOSIT);
  });

  it('an account the payer has not authorized cannot submit for it into its own session', async () => {
    const { address } = chain();
    const jobs = chain().jobs('stranger');
    // The facilitator is a delegate, but of another wallet.
    await mined(chain().jobs('otherUser').depositAndAuthorize(address.facilitator, { value: DEPOSIT }));
    const facilitatorSession = await openActiveSession(chain(), { owner: 'facilitator' });
    await expectRevert(submitJob(chain(), facilitatorSession, { by: 'facilitator' }), 'NotOwnerOrDelegate', {
      owner: address.user,
      caller: address.facilitator,
    });
    // A delegate revoked past its grace no longer submits into its own sessions either.
    const serviceSession = await openActiveSession(chain(), { owner: 'service' });
    await mined(chain().jobs('user').setDelegateAuthorization(address.service, false));
    await chain().clock.advance(SPEND_CUT_DELAY);
    await expectRevert(submitJob(chain(), serviceSession, { by: 'service' }), 'NotOwnerOrDelegate', {
      owner: address.user,
      caller: address.service,
    });
    expect(await jobs.prepaidBalanceOf(address.user)).toBe(DEPOSIT);
    expect(await jobs.nextJobId(facilitatorSession)).toBe((facilitatorSession << 32n) | 1n);
    expect(await jobs.nextJobId(serviceSession)).toBe((serviceSession << 32n) | 1n);
  });

  it('needs an Active session owned by the payer or by the delegate sending it, whose worker is still active', async () => {
    const { address } = chain();
    const unclaimed = await openSession(chain());
    await expectRevert(submitJob(chain(), unclaimed), 'SessionStateInvalid', {
      sessionId: unclaimed,
      state: BigInt(SessionState.Open),
    });
    const closed = await openActiveSession(chain());
    await mined(chain().jobs('user').closeSession(closed));
    await expectRevert(submitJob(chain(), closed), 'SessionStateInvalid', {
      state: BigInt(SessionState.Closed),
    });

    await mined(chain().jobs('otherUser').depositAndAuthorize(address.service, { value: DEPOSIT }));
    const othersSession = await openActiveSession(chain(), { owner: 'otherUser' });
    await expectRevert(submitJob(chain(), othersSession), 'SessionOwnerMismatch', {
      sessionId: othersSession,
      expected: address.otherUser,
      actual: address.user,
    });
    // A delegate of both wallets cannot put one wallet's job into the other's session.
    await expectRevert(submitJob(chain(), othersSession, { by: 'service' }), 'SessionOwnerMismatch', {
      sessionId: othersSession,
      expected: address.otherUser,
      actual: address.user,
    });

    const active = await openActiveSession(chain());
    await mined(chain().workers('worker').deregister());
    await expectRevert(submitJob(chain(), active), 'WorkerNotActive', { worker: address.worker });
  });

  it('refuses a model disabled after the session opened, and any submission while paused', async () => {
    const sessionId = await openActiveSession(chain());
    await mined(chain().jobs('owner').setModel(MODEL.name, 0n));
    await expectRevert(submitJob(chain(), sessionId), 'ModelDisabled');
    await mined(chain().jobs('owner').setModel(MODEL.name, FEE));
    await mined(chain().jobs('owner').pause());
    await expectRevert(submitJob(chain(), sessionId), 'EnforcedPause');
    await mined(chain().jobs('owner').unpause());
    await submitJob(chain(), sessionId);
  });
});
