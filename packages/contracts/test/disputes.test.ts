import { describe, expect, it } from '@jest/globals';
import { hexlify, keccak256, parseEther, randomBytes } from 'ethers';
import { toParametersStruct } from '../src/parameters.js';
import { JobState } from '../src/states.js';
import { useChain, type Actor } from './support/chain.js';
import { expectRevert } from './support/revert.js';
import {
  DEPLOY_CONFIG,
  DEPOSIT,
  MODEL,
  STAKE,
  eventOf,
  eventsOf,
  fundUserForService,
  mined,
  openActiveSession,
  registerWorker,
  submitJob,
} from './support/scenario.js';
import { signFinalAnswer, toCompact, toHighS } from './support/signatures.js';

const FEE = MODEL.feeWei;
const DISPUTE_WINDOW = 900;
const COMMITTED = hexlify(randomBytes(200));
const DIFFERENT = hexlify(randomBytes(200));

describe('disputeMismatch', () => {
  const chain = useChain(DEPLOY_CONFIG, async (c) => {
    await registerWorker(c, 'worker');
    await fundUserForService(c);
  });

  /** A job the worker completed committing `COMMITTED`'s hash. */
  async function completedJob(by: Actor = 'user') {
    const sessionId = await openActiveSession(chain(), { by });
    const { jobId } = await submitJob(chain(), sessionId, { by });
    const receipt = await mined(chain().jobs('worker').completeJob(jobId, keccak256(COMMITTED)));
    return { jobId, completedAt: BigInt((await chain().provider.getBlock(receipt.blockNumber))!.timestamp) };
  }

  const sign = (signer: Actor, jobId: bigint, ciphertext: string, chainId?: number) =>
    signFinalAnswer(
      chain().signers[signer],
      chainId ?? chain().anvil.chainId,
      chain().deployment.jobRegistryAddress,
      jobId,
      ciphertext,
    );

  it('a worker-signed answer other than the committed one refunds the payer and slashes the worker to it', async () => {
    const { address } = chain();
    const { jobId } = await completedJob();
    const slash = (await chain().jobs('stranger').parameters()).mismatchSlash;
    const receipt = await mined(
      chain()
        .jobs('user')
        .disputeMismatch(jobId, DIFFERENT, await sign('worker', jobId, DIFFERENT)),
    );
    expect(eventOf(receipt, 'JobDisputed').toObject()).toEqual({ jobId, slashed: slash });
    expect(eventOf(receipt, 'JobRefunded').amount).toBe(FEE);
    expect(eventOf(receipt, 'WorkerSlashed').toObject()).toEqual({ worker: address.worker, amount: slash });
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT + slash);
    expect(await chain().workers('stranger').stakeOf(address.worker)).toBe(STAKE - slash);
    expect((await chain().jobs('stranger').getJob(jobId)).state).toBe(BigInt(JobState.Refunded));
    // Slashed below the minimum stake, the worker takes no new sessions.
    expect(await chain().workers('stranger').isActive(address.worker)).toBe(false);
  });

  it("the owner's delegate disputes for it, also while the registry is paused", async () => {
    const { address } = chain();
    const { jobId } = await completedJob('service');
    await mined(chain().jobs('owner').pause());
    await mined(
      chain()
        .jobs('service')
        .disputeMismatch(jobId, DIFFERENT, await sign('worker', jobId, DIFFERENT)),
    );
    expect(await chain().jobs('stranger').delegateAllowance(address.user, address.service)).toBe(DEPOSIT);
  });

  it('a signed answer that matches the commitment proves nothing', async () => {
    const { jobId } = await completedJob();
    await expectRevert(
      chain()
        .jobs('user')
        .disputeMismatch(jobId, COMMITTED, await sign('worker', jobId, COMMITTED)),
      'ResponseMatchesCommitment',
      { jobId, responseHash: keccak256(COMMITTED) },
    );
  });

  it("needs the worker's signature over this chain, registry and job", async () => {
    const { address } = chain();
    const { jobId } = await completedJob();
    const jobs = chain().jobs('user');
    await expectRevert(
      jobs.disputeMismatch(jobId, DIFFERENT, await sign('stranger', jobId, DIFFERENT)),
      'NotWorkerSignature',
      { jobId, worker: address.worker, signer: address.stranger },
    );
    for (const signature of [
      await sign('worker', jobId + 1n, DIFFERENT),
      await sign('worker', jobId, DIFFERENT, 1),
      await sign('worker', jobId, COMMITTED),
    ]) {
      const decoded = await expectRevert(
        jobs.disputeMismatch(jobId, DIFFERENT, signature),
        'NotWorkerSignature',
      );
      expect(decoded.args.signer).not.toBe(address.worker);
    }
    const valid = await sign('worker', jobId, DIFFERENT);
    await expectRevert(
      jobs.disputeMismatch(jobId, DIFFERENT, toCompact(valid)),
      'ECDSAInvalidSignatureLength',
      {
        length: 64n,
      },
    );
    const highS = toHighS(valid);
    await expectRevert(jobs.disputeMismatch(jobId, DIFFERENT, highS.signature), 'ECDSAInvalidSignatureS', {
      s: highS.s,
    });
  });

  it('only the owner or its delegate, only within the dispute window, only for a Completed job', async () => {
    const { address, clock } = chain();
    const { jobId, completedAt } = await completedJob();
    const signature = await sign('worker', jobId, DIFFERENT);
    await expectRevert(
      chain().jobs('stranger').disputeMismatch(jobId, DIFFERENT, signature),
      'NotOwnerOrDelegate',
      {
        owner: address.user,
        caller: address.stranger,
      },
    );
    const closedAt = completedAt + BigInt(DISPUTE_WINDOW);
    await clock.setNextBlockTimestamp(Number(closedAt) + 1);
    await expectRevert(
      chain().jobs('user').disputeMismatch(jobId, DIFFERENT, signature),
      'DisputeWindowClosed',
      {
        jobId,
        closedAt,
      },
    );
    await mined(chain().jobs('stranger').releaseJob(jobId));
    await expectRevert(chain().jobs('user').disputeMismatch(jobId, DIFFERENT, signature), 'JobStateInvalid', {
      state: BigInt(JobState.Released),
    });
    const sessionId = await openActiveSession(chain());
    const running = await submitJob(chain(), sessionId);
    await expectRevert(
      chain()
        .jobs('user')
        .disputeMismatch(running.jobId, DIFFERENT, await sign('worker', running.jobId, DIFFERENT)),
      'JobStateInvalid',
      { state: BigInt(JobState.Submitted) },
    );
  });

  it('a dispute landing on the last second of the window counts', async () => {
    const { clock } = chain();
    const { jobId, completedAt } = await completedJob();
    await clock.setNextBlockTimestamp(Number(completedAt) + DISPUTE_WINDOW);
    await mined(
      chain()
        .jobs('user')
        .disputeMismatch(jobId, DIFFERENT, await sign('worker', jobId, DIFFERENT)),
    );
  });

  it('slashing takes at most the remaining stake and never blocks the refund', async () => {
    const { address } = chain();
    const parameters = await chain().jobs('stranger').parameters();
    await mined(
      chain()
        .jobs('owner')
        .setParameters(
          toParametersStruct({
            claimWindowSeconds: Number(parameters.claimWindow),
            jobTimeoutSeconds: Number(parameters.jobTimeout),
            inactivityTimeoutSeconds: Number(parameters.inactivityTimeout),
            refundGraceSeconds: Number(parameters.refundGrace),
            disputeWindowSeconds: Number(parameters.disputeWindow),
            maxAttempts: Number(parameters.maxAttempts),
            protocolShareBps: Number(parameters.protocolShareBps),
            mismatchSlashWei: parseEther('5'),
          }),
        ),
    );
    const first = await completedJob();
    const second = await completedJob();
    const drained = await mined(
      chain()
        .jobs('user')
        .disputeMismatch(first.jobId, DIFFERENT, await sign('worker', first.jobId, DIFFERENT)),
    );
    expect(eventOf(drained, 'JobDisputed').slashed).toBe(STAKE);
    expect(await chain().workers('stranger').stakeOf(address.worker)).toBe(0n);
    const nothingLeft = await mined(
      chain()
        .jobs('user')
        .disputeMismatch(second.jobId, DIFFERENT, await sign('worker', second.jobId, DIFFERENT)),
    );
    expect(eventOf(nothingLeft, 'JobDisputed').slashed).toBe(0n);
    expect(eventsOf(nothingLeft, 'WorkerSlashed')).toHaveLength(0);
    expect(eventOf(nothingLeft, 'JobRefunded').amount).toBe(FEE);
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT + STAKE);
  });
});
