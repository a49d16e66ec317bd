import { describe, expect, it } from '@jest/globals';
import { TypedDataEncoder, getBytes, hexlify, id, keccak256, parseEther, randomBytes } from 'ethers';
import { toParametersStruct } from '../src/parameters.js';
import { JobState } from '../src/states.js';
import { useChain, type Actor } from './support/chain.js';
import { expectRevert } from './support/revert.js';
import {
  DEPLOY_CONFIG,
  DEPOSIT,
  MODEL,
  STAKE,
  callWithBlobs,
  eventOf,
  eventsOf,
  fundUserForService,
  mined,
  openActiveSession,
  plain,
  registerWorker,
  submitJob,
} from './support/scenario.js';
import {
  finalAnswerTypedData,
  personalSignFinalAnswerDigest,
  signFinalAnswer,
  toCompact,
  toHighS,
  type FinalAnswerBinding,
} from './support/signatures.js';

const FEE = MODEL.feeWei;
const JOB_TIMEOUT = 120;
const DISPUTE_WINDOW = 900;
const COMMITTED = hexlify(randomBytes(200));
const DIFFERENT = hexlify(randomBytes(200));
/** The commit batch of a job committed alone: its one answer. */
const COMMIT_BATCH = [keccak256(COMMITTED)];

describe('disputeMismatch', () => {
  const chain = useChain(DEPLOY_CONFIG, async (c) => {
    await registerWorker(c, 'worker');
    await fundUserForService(c);
  });

  /** A job (first attempt) the worker completed committing `COMMITTED`'s hash. */
  async function completedJob(by: Actor = 'user') {
    const sessionId = await openActiveSession(chain(), { by });
    const { jobId } = await submitJob(chain(), sessionId, { by });
    const receipt = await mined(chain().jobs('worker').completeJob(jobId, keccak256(COMMITTED)));
    return {
      jobId,
      sessionId,
      attempt: 1n,
      completedAt: BigInt((await chain().provider.getBlock(receipt.blockNumber))!.timestamp),
    };
  }

  /** `signer`'s signature over `ciphertext` as the final of `job` (its attempt and session unless overridden). */
  const sign = (
    signer: Actor,
    job: { jobId: bigint; sessionId: bigint; attempt?: bigint },
    ciphertext: string,
    overrides: Partial<FinalAnswerBinding> = {},
  ) =>
    signFinalAnswer(
      chain().signers[signer],
      {
        chainId: chain().anvil.chainId,
        jobRegistry: chain().deployment.jobRegistryAddress,
        jobId: job.jobId,
        attempt: job.attempt ?? 1n,
        sessionId: job.sessionId,
        ...overrides,
      },
      ciphertext,
    );

  it('a worker-signed answer other than the committed one refunds the payer and slashes the worker to it', async () => {
    const { address } = chain();
    const job = await completedJob();
    const slash = (await chain().jobs('stranger').parameters()).mismatchSlash;
    const receipt = await mined(
      chain()
        .jobs('user')
        .disputeMismatch(job.jobId, 1n, DIFFERENT, await sign('worker', job, DIFFERENT), COMMIT_BATCH),
    );
    expect(eventOf(receipt, 'JobDisputed').toObject()).toEqual({ jobId: job.jobId, slashed: slash });
    expect(eventOf(receipt, 'JobRefunded').amount).toBe(FEE);
    expect(eventOf(receipt, 'WorkerSlashed').toObject()).toEqual({ worker: address.worker, amount: slash });
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT + slash);
    expect(await chain().workers('stranger').stakeOf(address.worker)).toBe(STAKE - slash);
    expect((await chain().jobs('stranger').getJob(job.jobId)).state).toBe(BigInt(JobState.Refunded));
    // Slashed below the minimum stake, the worker takes no new sessions.
    expect(await chain().workers('stranger').isActive(address.worker)).toBe(false);
  });

  it("the owner's delegate disputes for it, also while the registry is paused", async () => {
    const { address } = chain();
    const job = await completedJob('service');
    await mined(chain().jobs('owner').pause());
    await mined(
      chain()
        .jobs('service')
        .disputeMismatch(job.jobId, 1n, DIFFERENT, await sign('worker', job, DIFFERENT), COMMIT_BATCH),
    );
    expect(await chain().jobs('stranger').delegateAllowance(address.user, address.service)).toBe(DEPOSIT);
  });

  it('takes the EIP-712 FinalAnswer only: no personal_sign of any digest, whatever its bytes', async () => {
    // The audit's attack: the worker personal_signed a link challenge whose bytes were the old dispute
    // digest, and disputeMismatch took that as a signed final and slashed an honest worker.
    const { address } = chain();
    const job = await completedJob();
    const binding = {
      chainId: chain().anvil.chainId,
      jobRegistry: chain().deployment.jobRegistryAddress,
      jobId: job.jobId,
      attempt: 1n,
      sessionId: job.sessionId,
    };
    const typed = finalAnswerTypedData(binding, DIFFERENT);
    const typedDigest = TypedDataEncoder.hash(typed.domain, typed.types, typed.value);
    for (const signature of [
      await personalSignFinalAnswerDigest(chain().signers.worker, binding, DIFFERENT),
      await chain().signers.worker.signMessage(getBytes(typedDigest)),
    ]) {
      const decoded = await expectRevert(
        chain().jobs('user').disputeMismatch(job.jobId, 1n, DIFFERENT, signature, COMMIT_BATCH),
        'NotWorkerSignature',
        { jobId: job.jobId, worker: address.worker },
      );
      expect(decoded.args.signer).not.toBe(address.worker);
    }
    expect(await chain().workers('stranger').stakeOf(address.worker)).toBe(STAKE);
    expect(await chain().jobs('stranger').FINAL_ANSWER_TYPEHASH()).toBe(
      id('FinalAnswer(uint256 jobId,uint256 attempt,uint256 sessionId,bytes32 responseHash)'),
    );
    // The typed-data signature of the same final is taken.
    await mined(
      chain()
        .jobs('user')
        .disputeMismatch(job.jobId, 1n, DIFFERENT, await sign('worker', job, DIFFERENT), COMMIT_BATCH),
    );
    expect(await chain().workers('stranger').stakeOf(address.worker)).toBeLessThan(STAKE);
  });

  it('a signed answer that matches the commitment proves nothing', async () => {
    const job = await completedJob();
    await expectRevert(
      chain()
        .jobs('user')
        .disputeMismatch(job.jobId, 1n, COMMITTED, await sign('worker', job, COMMITTED), COMMIT_BATCH),
      'ResponseMatchesCommitment',
      { jobId: job.jobId, responseHash: keccak256(COMMITTED) },
    );
  });

  it("needs the worker's signature over this chain, registry, job, attempt and session", async () => {
    const { address } = chain();
    const job = await completedJob();
    const { jobId } = job;
    const jobs = chain().jobs('user');
    await expectRevert(
      jobs.disputeMismatch(jobId, 1n, DIFFERENT, await sign('stranger', job, DIFFERENT), COMMIT_BATCH),
      'NotWorkerSignature',
      { jobId, worker: address.worker, signer: address.stranger },
    );
    for (const signature of [
      await sign('worker', job, DIFFERENT, { jobId: jobId + 1n }),
      await sign('worker', job, DIFFERENT, { chainId: 1 }),
      await sign('worker', job, DIFFERENT, { jobRegistry: address.stranger }),
      await sign('worker', job, DIFFERENT, { attempt: 2n }),
      await sign('worker', job, DIFFERENT, { sessionId: job.sessionId + 1n }),
      await sign('worker', job, COMMITTED),
    ]) {
      const decoded = await expectRevert(
        jobs.disputeMismatch(jobId, 1n, DIFFERENT, signature, COMMIT_BATCH),
        'NotWorkerSignature',
      );
      expect(decoded.args.signer).not.toBe(address.worker);
    }
    const valid = await sign('worker', job, DIFFERENT);
    await expectRevert(
      jobs.disputeMismatch(jobId, 1n, DIFFERENT, toCompact(valid), COMMIT_BATCH),
      'ECDSAInvalidSignatureLength',
      {
        length: 64n,
      },
    );
    const highS = toHighS(valid);
    await expectRevert(
      jobs.disputeMismatch(jobId, 1n, DIFFERENT, highS.signature, COMMIT_BATCH),
      'ECDSAInvalidSignatureS',
      {
        s: highS.s,
      },
    );
  });

  it("names the job's current attempt, not an earlier or later one", async () => {
    const job = await completedJob();
    for (const attempt of [0n, 2n]) {
      await expectRevert(
        chain()
          .jobs('user')
          .disputeMismatch(
            job.jobId,
            attempt,
            DIFFERENT,
            await sign('worker', { ...job, attempt }, DIFFERENT),
            COMMIT_BATCH,
          ),
        'StaleAttempt',
        { jobId: job.jobId, attempt, currentAttempt: 1n },
      );
    }
  });

  describe('a final the worker signed for an attempt that timed out', () => {
    /**
     * The audit's case: the worker signs a final for attempt 1 but misses the deadline; the job is
     * reassigned to the same worker (into `into`) and answered honestly on attempt 2.
     */
    async function answeredOnSecondAttempt(into: 'the same session' | 'another session') {
      const first = await openActiveSession(chain());
      const { jobId } = await submitJob(chain(), first);
      const stale = { ciphertext: hexlify(randomBytes(200)), attempt: 1n, sessionId: first };
      const staleSignature = await sign('worker', { jobId, ...stale }, stale.ciphertext);
      await chain().clock.advance(JOB_TIMEOUT + 1);
      await mined(chain().jobs('stranger').timeoutJob(jobId));
      const second = into === 'the same session' ? first : await openActiveSession(chain());
      await callWithBlobs(chain(), 'user', 'reassignJob', [jobId, second]);
      await mined(chain().jobs('worker').completeJob(jobId, keccak256(COMMITTED)));
      const current = { jobId, attempt: 2n, sessionId: second };
      expect(plain(await chain().jobs('stranger').getJob(jobId))).toMatchObject({
        attempt: current.attempt,
        sessionId: current.sessionId,
        worker: chain().address.worker,
        state: BigInt(JobState.Completed),
      });
      return { current, stale, staleSignature };
    }

    it.each(['the same session', 'another session'] as const)(
      'cannot be used against the honest answer of attempt 2, reassigned into %s',
      async (into) => {
        const { address } = chain();
        const { current, stale, staleSignature } = await answeredOnSecondAttempt(into);
        const jobs = chain().jobs('user');
        await expectRevert(
          jobs.disputeMismatch(current.jobId, stale.attempt, stale.ciphertext, staleSignature, COMMIT_BATCH),
          'StaleAttempt',
          { jobId: current.jobId, attempt: 1n, currentAttempt: 2n },
        );
        // Claiming it was for the current attempt does not make it so.
        const decoded = await expectRevert(
          jobs.disputeMismatch(
            current.jobId,
            current.attempt,
            stale.ciphertext,
            staleSignature,
            COMMIT_BATCH,
          ),
          'NotWorkerSignature',
          { jobId: current.jobId, worker: address.worker },
        );
        expect(decoded.args.signer).not.toBe(address.worker);
        expect(await chain().workers('stranger').stakeOf(address.worker)).toBe(STAKE);
        expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT - FEE);
        expect((await chain().jobs('stranger').getJob(current.jobId)).state).toBe(BigInt(JobState.Completed));
      },
    );

    it('leaves a genuine mismatch on attempt 2 slashable', async () => {
      const { address } = chain();
      const { current } = await answeredOnSecondAttempt('another session');
      const slash = (await chain().jobs('stranger').parameters()).mismatchSlash;
      const jobs = chain().jobs('user');
      await expectRevert(
        jobs.disputeMismatch(
          current.jobId,
          2n,
          COMMITTED,
          await sign('worker', current, COMMITTED),
          COMMIT_BATCH,
        ),
        'ResponseMatchesCommitment',
        { jobId: current.jobId, responseHash: keccak256(COMMITTED) },
      );
      const receipt = await mined(
        jobs.disputeMismatch(
          current.jobId,
          2n,
          DIFFERENT,
          await sign('worker', current, DIFFERENT),
          COMMIT_BATCH,
        ),
      );
      expect(eventOf(receipt, 'JobDisputed').toObject()).toEqual({ jobId: current.jobId, slashed: slash });
      expect(eventOf(receipt, 'JobRefunded').amount).toBe(FEE);
      expect(await chain().workers('stranger').stakeOf(address.worker)).toBe(STAKE - slash);
      expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT + slash);
    });
  });

  it('only the owner or its delegate, only within the dispute window, only for a Completed job', async () => {
    const { address, clock } = chain();
    const job = await completedJob();
    const { jobId, completedAt } = job;
    const signature = await sign('worker', job, DIFFERENT);
    await expectRevert(
      chain().jobs('stranger').disputeMismatch(jobId, 1n, DIFFERENT, signature, COMMIT_BATCH),
      'NotOwnerOrDelegate',
      {
        owner: address.user,
        caller: address.stranger,
      },
    );
    const closedAt = completedAt + BigInt(DISPUTE_WINDOW);
    await clock.setNextBlockTimestamp(Number(closedAt) + 1);
    await expectRevert(
      chain().jobs('user').disputeMismatch(jobId, 1n, DIFFERENT, signature, COMMIT_BATCH),
      'DisputeWindowClosed',
      {
        jobId,
        closedAt,
      },
    );
    await mined(chain().jobs('stranger').releaseJob(jobId));
    await expectRevert(
      chain().jobs('user').disputeMismatch(jobId, 1n, DIFFERENT, signature, COMMIT_BATCH),
      'JobStateInvalid',
      {
        state: BigInt(JobState.Released),
      },
    );
    const sessionId = await openActiveSession(chain());
    const running = await submitJob(chain(), sessionId);
    await expectRevert(
      chain()
        .jobs('user')
        .disputeMismatch(
          running.jobId,
          1n,
          DIFFERENT,
          await sign('worker', { jobId: running.jobId, sessionId }, DIFFERENT),
          COMMIT_BATCH,
        ),
      'JobStateInvalid',
      { state: BigInt(JobState.Submitted) },
    );
  });

  it('a dispute landing on the last second of the window counts', async () => {
    const { clock } = chain();
    const job = await completedJob();
    await clock.setNextBlockTimestamp(Number(job.completedAt) + DISPUTE_WINDOW);
    await mined(
      chain()
        .jobs('user')
        .disputeMismatch(job.jobId, 1n, DIFFERENT, await sign('worker', job, DIFFERENT), COMMIT_BATCH),
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
        .disputeMismatch(first.jobId, 1n, DIFFERENT, await sign('worker', first, DIFFERENT), COMMIT_BATCH),
    );
    expect(eventOf(drained, 'JobDisputed').slashed).toBe(STAKE);
    expect(await chain().workers('stranger').stakeOf(address.worker)).toBe(0n);
    const nothingLeft = await mined(
      chain()
        .jobs('user')
        .disputeMismatch(second.jobId, 1n, DIFFERENT, await sign('worker', second, DIFFERENT), COMMIT_BATCH),
    );
    expect(eventOf(nothingLeft, 'JobDisputed').slashed).toBe(0n);
    expect(eventsOf(nothingLeft, 'WorkerSlashed')).toHaveLength(0);
    expect(eventOf(nothingLeft, 'JobRefunded').amount).toBe(FEE);
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.user)).toBe(DEPOSIT + STAKE);
  });
});
