import { describe, expect, it } from '@jest/globals';
import { JobState } from '../src/states.js';
import { useChain } from './support/chain.js';
import { jobSteps } from './support/jobs.js';
import { expectRevert } from './support/revert.js';
import {
  DEPLOY_CONFIG,
  DEPOSIT,
  MODEL,
  OTHER_MODEL_ID,
  callWithBlobs,
  eventOf,
  fundUserForService,
  mined,
  plain,
  openActiveSession,
  openSession,
  registerWorker,
} from './support/scenario.js';

const FEE = MODEL.feeWei;
const JOB_TIMEOUT = 120;
const REFUND_GRACE = 300;

describe('job retries and refunds', () => {
  const chain = useChain(DEPLOY_CONFIG, async (c) => {
    await registerWorker(c, 'worker');
    await registerWorker(c, 'otherWorker');
    await fundUserForService(c);
  });
  const { submitted, failed, completed, state, balance } = jobSteps(chain);

  describe('reassignJob', () => {
    it('runs a failed job again with a new blob in another session, without a second payment', async () => {
      const { address, provider } = chain();
      const { jobId } = await failed({ by: 'service' });
      const allowance = await chain().jobs('stranger').delegateAllowance(address.user, address.service);
      const next = await openActiveSession(chain(), { by: 'service', worker: 'otherWorker' });
      const { receipt, versionedHashes } = await callWithBlobs(chain(), 'service', 'reassignJob', [
        jobId,
        next,
      ]);
      expect(eventOf(receipt, 'JobReassigned').toObject()).toEqual({
        jobId,
        newSessionId: next,
        worker: address.otherWorker,
        promptBlobHash: versionedHashes[0],
        promptIndex: 0n,
      });
      const timestamp = (await provider.getBlock(receipt.blockNumber))!.timestamp;
      const job = await chain().jobs('stranger').getJob(jobId);
      expect(plain(job)).toMatchObject({
        sessionId: next,
        worker: address.otherWorker,
        promptIndex: 0n,
        attempt: 2n,
        state: BigInt(JobState.Submitted),
        deadline: BigInt(timestamp + JOB_TIMEOUT),
        failedAt: 0n,
        fee: FEE,
      });
      expect(await balance('user')).toBe(DEPOSIT - FEE);
      expect(await chain().jobs('stranger').delegateAllowance(address.user, address.service)).toBe(allowance);

      // maxAttempts is 2: after the second failure only a refund is left.
      await mined(chain().jobs('otherWorker').failJob(jobId));
      const third = await openActiveSession(chain(), { by: 'service' });
      await expectRevert(
        callWithBlobs(chain(), 'service', 'reassignJob', [jobId, third]),
        'MaxAttemptsReached',
        {
          jobId,
          attempts: 2n,
        },
      );
    });

    it('needs the blob it names and a Failed job', async () => {
      const { jobId } = await failed();
      const next = await openActiveSession(chain());
      for (const [blobs, blobIndex] of [
        [0, 0],
        [2, 2],
      ] as const) {
        await expectRevert(
          callWithBlobs(chain(), 'user', 'reassignJob', [jobId, next], blobs, { blobIndex }),
          'BlobMissing',
          { blobIndex: BigInt(blobIndex) },
        );
      }
      const running = await submitted();
      await expectRevert(
        callWithBlobs(chain(), 'user', 'reassignJob', [running.jobId, next]),
        'JobStateInvalid',
        {
          state: BigInt(JobState.Submitted),
        },
      );
    });

    it('only by the owner of both sessions or its delegate, into a session of the same model taking jobs', async () => {
      const { address } = chain();
      const { jobId } = await failed();
      const next = await openActiveSession(chain());
      await expectRevert(
        callWithBlobs(chain(), 'stranger', 'reassignJob', [jobId, next]),
        'NotOwnerOrDelegate',
        {
          owner: address.user,
          caller: address.stranger,
        },
      );
      await mined(chain().jobs('otherUser').depositAndAuthorize(address.service, { value: DEPOSIT }));
      const othersSession = await openActiveSession(chain(), { owner: 'otherUser', by: 'service' });
      await expectRevert(
        callWithBlobs(chain(), 'service', 'reassignJob', [jobId, othersSession]),
        'SessionOwnerMismatch',
        { sessionId: othersSession, expected: address.user, actual: address.otherUser },
      );
      const otherModel = await openActiveSession(chain(), { modelId: OTHER_MODEL_ID });
      await expectRevert(
        callWithBlobs(chain(), 'user', 'reassignJob', [jobId, otherModel]),
        'SessionModelMismatch',
        {
          sessionId: otherModel,
          actual: OTHER_MODEL_ID,
        },
      );
      const unclaimed = await openSession(chain());
      await expectRevert(
        callWithBlobs(chain(), 'user', 'reassignJob', [jobId, unclaimed]),
        'SessionStateInvalid',
      );
      await mined(chain().workers('worker').deregister());
      await expectRevert(callWithBlobs(chain(), 'user', 'reassignJob', [jobId, next]), 'WorkerNotActive');
    });

    it('only within the refund grace after the failure', async () => {
      const { clock } = chain();
      const { jobId } = await failed();
      const next = await openActiveSession(chain());
      const { failedAt } = await chain().jobs('stranger').getJob(jobId);
      await clock.setNextBlockTimestamp(Number(failedAt) + REFUND_GRACE + 1);
      await expectRevert(
        callWithBlobs(chain(), 'user', 'reassignJob', [jobId, next]),
        'ReassignWindowClosed',
        {
          jobId,
          closedAt: failedAt + BigInt(REFUND_GRACE),
        },
      );
    });

    it('is stopped by pause', async () => {
      const { jobId } = await failed();
      const next = await openActiveSession(chain());
      await mined(chain().jobs('owner').pause());
      await expectRevert(callWithBlobs(chain(), 'user', 'reassignJob', [jobId, next]), 'EnforcedPause');
    });
  });

  describe('refundJob', () => {
    it('the owner or its delegate refunds at once, to the balance', async () => {
      for (const refunder of ['user', 'service'] as const) {
        const { jobId } = await failed();
        const before = await balance('user');
        const receipt = await mined(chain().jobs(refunder).refundJob(jobId));
        expect(eventOf(receipt, 'JobRefunded').toObject()).toEqual({ jobId, amount: FEE });
        expect(await balance('user')).toBe(before + FEE);
        expect(await state(jobId)).toBe(JobState.Refunded);
        await expectRevert(chain().jobs(refunder).refundJob(jobId), 'JobStateInvalid', {
          state: BigInt(JobState.Refunded),
        });
      }
    });

    it('anyone refunds once the grace has passed, not before', async () => {
      const { clock } = chain();
      const { jobId } = await failed();
      const { failedAt } = await chain().jobs('stranger').getJob(jobId);
      const opensAfter = failedAt + BigInt(REFUND_GRACE);
      await clock.setNextBlockTimestamp(Number(opensAfter));
      await expectRevert(chain().jobs('stranger').refundJob(jobId), 'RefundNotYetOpen', {
        jobId,
        opensAfter,
      });
      await clock.setNextBlockTimestamp(Number(opensAfter) + 1);
      await mined(chain().jobs('stranger').refundJob(jobId));
      expect(await balance('user')).toBe(DEPOSIT);
    });

    it('only Failed jobs are refunded', async () => {
      const { jobId } = await submitted();
      await expectRevert(chain().jobs('user').refundJob(jobId), 'JobStateInvalid', {
        state: BigInt(JobState.Submitted),
      });
      const done = await completed();
      await expectRevert(chain().jobs('user').refundJob(done.jobId), 'JobStateInvalid', {
        state: BigInt(JobState.Completed),
      });
    });

    it("gives the fee back to the delegate's allowance only while the allowance epoch is unchanged", async () => {
      const { address } = chain();
      const allowance = () => chain().jobs('stranger').delegateAllowance(address.user, address.service);

      const unchanged = await failed({ by: 'service' });
      await mined(chain().jobs('user').depositAndAuthorize(address.service, { value: 1n }));
      const before = await allowance();
      await mined(chain().jobs('service').refundJob(unchanged.jobId));
      expect(await allowance()).toBe(before + FEE);

      const reset = await failed({ by: 'service' });
      await mined(chain().jobs('user').setDelegateAllowance(address.service, 7n));
      await mined(chain().jobs('service').refundJob(reset.jobId));
      expect(await allowance()).toBe(7n);

      await mined(chain().jobs('user').setDelegateAllowance(address.service, DEPOSIT));
      const revoked = await failed({ by: 'service' });
      await mined(chain().jobs('user').setDelegateAuthorization(address.service, false));
      await mined(chain().jobs('user').refundJob(revoked.jobId));
      expect(await allowance()).toBe(0n);
      // The balance gets every refund regardless.
      expect(await balance('user')).toBe(DEPOSIT + 1n);
    });
  });
});
