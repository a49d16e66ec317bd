import { describe, expect, it } from '@jest/globals';
import { hexlify, keccak256, randomBytes } from 'ethers';
import { JobState } from '../src/states.js';
import { useChain, type Actor } from './support/chain.js';
import { expectRevert } from './support/revert.js';
import {
  DEPLOY_CONFIG,
  DEPOSIT,
  MODEL,
  eventOf,
  fundUserForService,
  mined,
  openActiveSession,
  registerWorker,
  submitJob,
} from './support/scenario.js';

const FEE = MODEL.feeWei;
const DISPUTE_WINDOW = 900;

describe('refundUndelivered', () => {
  const chain = useChain(DEPLOY_CONFIG, async (c) => {
    await registerWorker(c, 'worker');
    await fundUserForService(c);
  });

  /** A job the worker completed; submitted by the service as the user's delegate unless `by` says otherwise. */
  async function completedJob(by: Actor = 'service') {
    const sessionId = await openActiveSession(chain(), { by, owner: 'user' });
    const { jobId } = await submitJob(chain(), sessionId, { by, payer: 'user' });
    await mined(
      chain()
        .jobs('worker')
        .completeJob(jobId, keccak256(hexlify(randomBytes(64)))),
    );
    return jobId;
  }

  it('the delegate that submitted a completed job refunds it in full: balance and allowance back, worker unpaid', async () => {
    const { address } = chain();
    const jobId = await completedJob();
    const allowanceBefore = await chain().jobs('stranger').delegateAllowance(address.user, address.service);
    const receipt = await mined(chain().jobs('service').refundUndelivered(jobId));
    expect(eventOf(receipt, 'JobRefunded').toObject()).toEqual({ jobId, amount: FEE });
    const job = await chain().jobs('stranger').getJob(jobId);
    expect(Number(job.state)).toBe(JobState.Refunded);
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT);
    expect(await chain().jobs('stranger').delegateAllowance(address.user, address.service)).toBe(
      allowanceBefore + FEE,
    );
    // Refunded is terminal: neither a second refund nor a release.
    await expectRevert(chain().jobs('service').refundUndelivered(jobId), 'JobStateInvalid');
    await chain().clock.advance(DISPUTE_WINDOW + 1);
    await expectRevert(chain().jobs('stranger').releaseJob(jobId), 'JobStateInvalid');
  });

  it('the payer, the worker or a stranger cannot: a caller never takes an answer and its fee back', async () => {
    const { address } = chain();
    const jobId = await completedJob();
    for (const actor of ['user', 'worker', 'stranger'] as const)
      await expectRevert(chain().jobs(actor).refundUndelivered(jobId), 'NotJobSubmitter', {
        jobId,
        caller: address[actor],
      });
  });

  it('a job the payer submitted itself cannot be refunded this way, even by its authorized delegate', async () => {
    const jobId = await completedJob('user');
    await expectRevert(chain().jobs('service').refundUndelivered(jobId), 'NotJobSubmitter');
    await expectRevert(chain().jobs('user').refundUndelivered(jobId), 'NotJobSubmitter');
  });

  it('only a Completed job, and only within its dispute window', async () => {
    const sessionId = await openActiveSession(chain(), { by: 'service', owner: 'user' });
    const { jobId: submitted } = await submitJob(chain(), sessionId, { by: 'service', payer: 'user' });
    await expectRevert(chain().jobs('service').refundUndelivered(submitted), 'JobStateInvalid');
    const jobId = await completedJob();
    await chain().clock.advance(DISPUTE_WINDOW + 1);
    await expectRevert(chain().jobs('service').refundUndelivered(jobId), 'DisputeWindowClosed');
  });
});
