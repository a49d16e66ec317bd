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
  submitJob,
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
      jobId: 1n,
      sessionId,
      payer: address.user,
      worker: address.worker,
      fee: FEE,
      promptBlobHash: versionedHashes[0],
    });
    const job = await chain().jobs('stranger').getJob(jobId);
    expect(plain(job)).toMatchObject({
      payer: address.user,
      worker: address.worker,
      delegate: ZeroAddress,
      sessionId,
      fee: FEE,
      promptBlobHash: versionedHashes[0],
      deadline: BigInt(timestamp + 120),
      attempt: 1n,
      state: BigInt(JobState.Submitted),
    });
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT - FEE);
    // Escrow stays inside the contract: its ether does not move.
    expect(await provider.getBalance(deployment.jobRegistryAddress)).toBe(heldBefore);
    expect((await chain().jobs('stranger').getSession(sessionId)).lastActivityAt).toBe(BigInt(timestamp));
  });

  it('reverts without exactly one blob and charges nothing', async () => {
    const { address } = chain();
    const sessionId = await openActiveSession(chain());
    for (const blobs of [0, 2, 3]) {
      await expectRevert(
        callWithBlobs(chain(), 'user', 'submitJobFor', [address.user, sessionId, FEE], blobs),
        'BlobCountInvalid',
        { count: BigInt(blobs) },
      );
    }
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT);
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
    await expectRevert(submitJob(chain(), sessionId, { by: 'service' }), 'InsufficientAllowance', {
      user: address.user,
      delegate: address.service,
      required: FEE,
      available: FEE - 1n,
    });
    await mined(
      chain()
        .jobs('user')
        .withdrawBalance(DEPOSIT - FEE + 1n),
    );
    await expectRevert(submitJob(chain(), sessionId), 'InsufficientBalance', {
      user: address.user,
      required: FEE,
      available: FEE - 1n,
    });
  });

  it('only the payer or its authorized delegate submits', async () => {
    const { address } = chain();
    const sessionId = await openActiveSession(chain());
    await expectRevert(submitJob(chain(), sessionId, { by: 'stranger' }), 'NotOwnerOrDelegate', {
      owner: address.user,
      caller: address.stranger,
    });
    await mined(chain().jobs('user').setDelegateAuthorization(address.service, false));
    await expectRevert(submitJob(chain(), sessionId, { by: 'service' }), 'NotOwnerOrDelegate', {
      caller: address.service,
    });
  });

  it('needs an Active session owned by the payer whose worker is still active', async () => {
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
