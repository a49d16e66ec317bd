import { describe, expect, it } from '@jest/globals';
import { concat, keccak256, ZeroAddress, ZeroHash } from 'ethers';
import { jobRegistryInterface } from '../src/connect.js';
import { decodeRevertData } from '../src/errors.js';
import { JobState } from '../src/states.js';
import { useChain } from './support/chain.js';
import { RESPONSE, jobSteps } from './support/jobs.js';
import { deployReentrantAccount } from './support/reentrant.js';
import { expectRevert } from './support/revert.js';
import {
  DEPLOY_CONFIG,
  DEPOSIT,
  MODEL,
  eventOf,
  fundUserForService,
  mined,
  registerWorker,
  sessionPublicKey,
  submitJob,
} from './support/scenario.js';

const FEE = MODEL.feeWei;
const DISPUTE_WINDOW = 900;

describe('job settlement', () => {
  const chain = useChain(DEPLOY_CONFIG, async (c) => {
    await registerWorker(c, 'worker');
    await registerWorker(c, 'otherWorker');
    await fundUserForService(c);
  });
  const { submitted, failed, completed, state, balance } = jobSteps(chain);

  describe('completeJob', () => {
    it("the job's worker commits the response hash before the deadline", async () => {
      const { address, provider } = chain();
      const { jobId, receipt } = await completed();
      expect(eventOf(receipt, 'JobCompleted').toObject()).toEqual({
        jobId,
        worker: address.worker,
        responseHash: RESPONSE,
      });
      const job = await chain().jobs('stranger').getJob(jobId);
      expect(job.state).toBe(BigInt(JobState.Completed));
      // Committed alone: a commit batch of its one answer.
      expect(job.commitIndex).toBe(0n);
      expect(await chain().jobs('stranger').commitRoot(job.commitBatch)).toBe(
        keccak256(concat([ZeroHash, RESPONSE])),
      );
      expect(job.completedAt).toBe(BigInt((await provider.getBlock(receipt.blockNumber))!.timestamp));
      await expectRevert(chain().jobs('worker').completeJob(jobId, RESPONSE), 'JobStateInvalid', {
        jobId,
        state: BigInt(JobState.Completed),
      });
    });

    it('refuses other callers and an empty hash; a job in a closed session still completes', async () => {
      const { address } = chain();
      const { jobId, sessionId } = await submitted();
      await expectRevert(chain().jobs('otherWorker').completeJob(jobId, RESPONSE), 'NotJobWorker', {
        jobId,
        caller: address.otherWorker,
      });
      await expectRevert(
        chain()
          .jobs('worker')
          .completeJob(jobId, `0x${'00'.repeat(32)}`),
        'ZeroResponseHash',
      );
      await mined(chain().jobs('user').closeSession(sessionId));
      await mined(chain().jobs('worker').completeJob(jobId, RESPONSE));
    });

    it('a completion landing at the deadline counts; after it the job can only time out', async () => {
      const { clock } = chain();
      const onTime = await submitted();
      const late = await submitted();
      const { deadline } = await chain().jobs('stranger').getJob(onTime.jobId);
      await clock.setNextBlockTimestamp(Number(deadline));
      await mined(chain().jobs('worker').completeJob(onTime.jobId, RESPONSE));
      const lateDeadline = (await chain().jobs('stranger').getJob(late.jobId)).deadline;
      await clock.setNextBlockTimestamp(Number(lateDeadline) + 1);
      await expectRevert(chain().jobs('worker').completeJob(late.jobId, RESPONSE), 'JobDeadlinePassed', {
        jobId: late.jobId,
        deadline: lateDeadline,
      });
    });
  });

  describe('failJob and timeoutJob', () => {
    it('the worker fails its job; the fee stays in escrow', async () => {
      const { address } = chain();
      const { jobId } = await submitted();
      await expectRevert(chain().jobs('stranger').failJob(jobId), 'NotJobWorker');
      const receipt = await mined(chain().jobs('worker').failJob(jobId));
      expect(eventOf(receipt, 'JobFailed').toObject()).toEqual({
        jobId,
        worker: address.worker,
        timedOut: false,
      });
      expect(await state(jobId)).toBe(JobState.Failed);
      expect(await balance('user')).toBe(DEPOSIT - FEE);
      await expectRevert(chain().jobs('worker').failJob(jobId), 'JobStateInvalid');
    });

    it('anyone times out a job once its deadline has passed, not before', async () => {
      const { clock } = chain();
      const { jobId } = await submitted();
      const { deadline } = await chain().jobs('stranger').getJob(jobId);
      await clock.setNextBlockTimestamp(Number(deadline));
      await expectRevert(chain().jobs('stranger').timeoutJob(jobId), 'JobDeadlineNotReached', {
        jobId,
        deadline,
      });
      await clock.setNextBlockTimestamp(Number(deadline) + 1);
      const receipt = await mined(chain().jobs('stranger').timeoutJob(jobId));
      expect(eventOf(receipt, 'JobFailed').timedOut).toBe(true);
      expect(await state(jobId)).toBe(JobState.Failed);
    });
  });

  describe('releaseJob and earnings', () => {
    it('releases after the dispute window: the fee less the protocol share becomes the worker earnings', async () => {
      const { address, clock } = chain();
      const { jobId } = await completed();
      const { completedAt } = await chain().jobs('stranger').getJob(jobId);
      const endsAt = completedAt + BigInt(DISPUTE_WINDOW);
      await clock.setNextBlockTimestamp(Number(endsAt));
      await expectRevert(chain().jobs('stranger').releaseJob(jobId), 'DisputeWindowOpen', { jobId, endsAt });
      await clock.setNextBlockTimestamp(Number(endsAt) + 1);
      const receipt = await mined(chain().jobs('stranger').releaseJob(jobId));
      const protocolShare = (FEE * 500n) / 10_000n;
      expect(eventOf(receipt, 'JobReleased').toObject()).toEqual({
        jobId,
        workerShare: FEE - protocolShare,
        protocolShare,
      });
      expect(await chain().jobs('stranger').earningsOf(address.worker)).toBe(FEE - protocolShare);
      expect(await chain().jobs('stranger').protocolFees()).toBe(protocolShare);
      expect(await state(jobId)).toBe(JobState.Released);
      await expectRevert(chain().jobs('stranger').releaseJob(jobId), 'JobStateInvalid', {
        state: BigInt(JobState.Released),
      });
    });

    it('releaseJobs releases a batch, or nothing when one of them is not releasable', async () => {
      const { clock } = chain();
      const first = await completed();
      const second = await completed();
      const pending = await submitted();
      await clock.advance(DISPUTE_WINDOW + 1);
      await expectRevert(
        chain().jobs('stranger').releaseJobs([first.jobId, pending.jobId]),
        'JobStateInvalid',
        { jobId: pending.jobId },
      );
      expect(await state(first.jobId)).toBe(JobState.Completed);
      await mined(chain().jobs('stranger').releaseJobs([first.jobId, second.jobId]));
      expect(await state(first.jobId)).toBe(JobState.Released);
      expect(await state(second.jobId)).toBe(JobState.Released);
    });

    it('the worker withdraws its earnings and the owner the protocol fees', async () => {
      const { address, clock, provider, deployment } = chain();
      await expectRevert(chain().jobs('worker').withdrawEarnings(), 'NothingToWithdraw', {
        account: address.worker,
      });
      await expectRevert(chain().jobs('owner').withdrawProtocolFees(address.owner), 'NothingToWithdraw');
      const { jobId } = await completed();
      await clock.advance(DISPUTE_WINDOW + 1);
      await mined(chain().jobs('stranger').releaseJob(jobId));
      const protocolShare = (FEE * 500n) / 10_000n;

      const workerBefore = await provider.getBalance(address.worker);
      const withdrawn = await mined(chain().jobs('worker').withdrawEarnings());
      expect(eventOf(withdrawn, 'EarningsWithdrawn').amount).toBe(FEE - protocolShare);
      expect(await provider.getBalance(address.worker)).toBe(
        workerBefore + FEE - protocolShare - withdrawn.gasUsed * withdrawn.gasPrice,
      );
      expect(await chain().jobs('stranger').earningsOf(address.worker)).toBe(0n);

      await expectRevert(chain().jobs('owner').withdrawProtocolFees(ZeroAddress), 'ZeroAddress');
      await expectRevert(
        chain().jobs('owner').withdrawProtocolFees(deployment.workerRegistryAddress),
        'TransferFailed',
        {
          to: deployment.workerRegistryAddress,
          amount: protocolShare,
        },
      );
      const strangerBefore = await provider.getBalance(address.stranger);
      const fees = await mined(chain().jobs('owner').withdrawProtocolFees(address.stranger));
      expect(eventOf(fees, 'ProtocolFeesWithdrawn').toObject()).toEqual({
        to: address.stranger,
        amount: protocolShare,
      });
      expect(await provider.getBalance(address.stranger)).toBe(strangerBefore + protocolShare);
    });

    it('withdrawEarnings cannot be re-entered by a contract worker', async () => {
      const { deployment, clock, address } = chain();
      const account = await deployReentrantAccount(chain(), 'stranger');
      const worker = await account.getAddress();
      const registry = deployment.jobRegistryAddress;
      const encode = jobRegistryInterface.encodeFunctionData.bind(jobRegistryInterface);
      await mined(
        account.execute(
          deployment.workerRegistryAddress,
          10n ** 17n,
          deployment.workerRegistry.interface.encodeFunctionData('register', [
            [deployment.models[0]!.modelId],
          ]),
          { value: 10n ** 17n },
        ),
      );
      const opened = await mined(
        chain().jobs('user').openSession(address.user, deployment.models[0]!.modelId, worker),
      );
      const sessionId = eventOf(opened, 'SessionOpened').sessionId as bigint;
      await mined(account.execute(registry, 0n, encode('claimSession', [sessionId, sessionPublicKey()])));
      const { jobId } = await submitJob(chain(), sessionId);
      await mined(account.execute(registry, 0n, encode('completeJob', [jobId, RESPONSE])));
      await clock.advance(DISPUTE_WINDOW + 1);
      await mined(chain().jobs('stranger').releaseJob(jobId));
      const earnings = await chain().jobs('stranger').earningsOf(worker);

      await mined(account.armReentry(registry, encode('withdrawEarnings')));
      await mined(account.execute(registry, 0n, encode('withdrawEarnings')));
      expect(await account.reentered()).toBe(false);
      expect(decodeRevertData(await account.reentryResult())?.name).toBe('ReentrancyGuardReentrantCall');
      expect(await account.received()).toBe(earnings);
    });
  });

  it('pause stops no settlement: complete, fail, timeout, refund, release and withdrawals keep working', async () => {
    const { clock, address } = chain();
    const toComplete = await submitted();
    const toFail = await submitted();
    const toTimeOut = await submitted();
    const released = await completed();
    await mined(chain().jobs('user').requestWithdrawal(1n));
    await mined(chain().jobs('owner').pause());
    await mined(chain().jobs('worker').completeJob(toComplete.jobId, RESPONSE));
    await mined(chain().jobs('worker').failJob(toFail.jobId));
    await mined(chain().jobs('user').refundJob(toFail.jobId));
    await clock.advance(DISPUTE_WINDOW + 1);
    await mined(chain().jobs('stranger').timeoutJob(toTimeOut.jobId));
    await mined(chain().jobs('stranger').releaseJob(released.jobId));
    await mined(chain().jobs('worker').withdrawEarnings());
    await mined(chain().jobs('owner').withdrawProtocolFees(address.owner));
    await mined(chain().jobs('user').withdrawBalance(1n));
    await mined(chain().jobs('user').closeSession(toComplete.sessionId));
    expect(await chain().jobs('stranger').paused()).toBe(true);
  });

  it('every wei the registry holds is a balance, an escrowed fee, earnings or protocol fees', async () => {
    const { clock, provider, deployment, address } = chain();
    const escrowed = [await submitted(), await failed()];
    const released = await completed();
    await clock.advance(DISPUTE_WINDOW + 1);
    await mined(chain().jobs('stranger').releaseJob(released.jobId));
    const jobs = chain().jobs('stranger');
    let accounted = await jobs.protocolFees();
    for (const actor of ['user', 'otherUser', 'service'] as const)
      accounted += await jobs.prepaidBalanceOf(address[actor]);
    for (const actor of ['worker', 'otherWorker'] as const)
      accounted += await jobs.earningsOf(address[actor]);
    for (const { jobId } of escrowed) accounted += (await jobs.getJob(jobId)).fee;
    expect(await provider.getBalance(deployment.jobRegistryAddress)).toBe(accounted);
  });
});
