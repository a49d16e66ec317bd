import { describe, expect, it } from '@jest/globals';
import { blobSidecarOf, commitsTo, SessionState, type Session } from '@svc/chain';
import { jobRegistryInterface } from '@svc/contracts';
import { Transaction, Wallet } from 'ethers';
import {
  checkPendingJob,
  PendingJobRejectedError,
  UnconfirmedWork,
  type PendingJobChainView,
  type PendingJobOffer,
} from '../../src/jobs/pending-job-check.js';

const CHAIN_ID = 31337n;
const REGISTRY = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const WORKER = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';
const owner = new Wallet('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d');
const operator = new Wallet('0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a');
const stranger = new Wallet('0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6');
/** A keyed wallet that authorized the owner (the service) as its delegate, in the cases that say so. */
const payer = new Wallet('0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a');
const SESSION_ID = 5n;
const JOB_ID = (SESSION_ID << 32n) | 3n;

/** The chain as the worker reads it; `delegates` lists the [user, delegate] pairs authorized. */
function view(
  overrides: Partial<Session> = {},
  delegates: ReadonlyArray<readonly [Wallet, Wallet]> = [],
): PendingJobChainView {
  const session: Session = {
    sessionId: SESSION_ID,
    owner: owner.address,
    worker: WORKER,
    modelId: '0x00',
    state: SessionState.Active,
    claimDeadline: 0,
    lastActivityAt: 0,
    publicKey: '0x',
    ...overrides,
  };
  return {
    chainId: CHAIN_ID,
    jobRegistry: REGISTRY,
    worker: WORKER,
    getSession: async () => session,
    principalOf: async (account) =>
      account.toLowerCase() === operator.address.toLowerCase() ? owner.address : account,
    isDelegateAuthorized: async (user, delegate) =>
      delegates.some(
        ([authorizing, authorized]) =>
          authorizing.address.toLowerCase() === user.toLowerCase() &&
          authorized.address.toLowerCase() === delegate.toLowerCase(),
      ),
    commitsTo,
  };
}

const submitJobFor = (payerAddress: string) =>
  jobRegistryInterface.encodeFunctionData('submitJobFor', [
    payerAddress,
    SESSION_ID,
    JOB_ID,
    10n ** 15n,
    0,
    0,
  ]);

/** A settlement's calldata; the authorization's contents are the contract's to check, not the worker's. */
const submitJobWithDebit = () =>
  jobRegistryInterface.encodeFunctionData('submitJobWithDebit', [
    SESSION_ID,
    JOB_ID,
    {
      payer: payer.address,
      payTo: owner.address,
      facilitator: owner.address,
      maxAmount: 10n ** 15n,
      deadline: 1n,
      nonce: `0x${'11'.repeat(32)}`,
    },
    `0x${'22'.repeat(65)}`,
    0,
    0,
  ]);

const sidecar = blobSidecarOf(new TextEncoder().encode('a sealed prompt'));

async function offer(
  options: {
    signer?: Wallet;
    data?: string;
    to?: string;
    blobHash?: string;
    blobHashes?: string[];
    jobId?: bigint;
  } = {},
): Promise<PendingJobOffer> {
  const jobId = options.jobId ?? JOB_ID;
  const tx = Transaction.from({
    type: 3,
    chainId: CHAIN_ID,
    nonce: 7,
    to: options.to ?? REGISTRY,
    data:
      options.data ??
      jobRegistryInterface.encodeFunctionData('submitJobFor', [
        owner.address,
        SESSION_ID,
        jobId,
        10n ** 15n,
        0,
        0,
      ]),
    maxFeePerGas: 10n ** 9n,
    maxPriorityFeePerGas: 10n ** 9n,
    maxFeePerBlobGas: 10n ** 9n,
    gasLimit: 300_000n,
    blobVersionedHashes: options.blobHashes ?? [options.blobHash ?? sidecar.versionedHash],
  });
  const signed = await (options.signer ?? owner).signTransaction(tx);
  return {
    jobId: JOB_ID,
    sessionId: SESSION_ID,
    attempt: 1,
    rawTransaction: Buffer.from(signed.slice(2), 'hex'),
    blob: sidecar.data,
    commitment: sidecar.commitment,
  };
}

async function rejection(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof PendingJobRejectedError) return error.reason;
    throw error;
  }
  return 'accepted';
}

describe('checkPendingJob', () => {
  it('accepts a submission signed by the owner or an operator of it, naming the blob it carries', async () => {
    const checked = await checkPendingJob(await offer(), view());
    expect(checked.jobId).toBe(JOB_ID);
    expect(checked.promptBlobHash).toBe(sidecar.versionedHash);
    expect(checked.sender).toBe(owner.address);
    const byOperator = await checkPendingJob(await offer({ signer: operator }), view());
    expect(byOperator.sender).toBe(operator.address);
    expect(byOperator.txHash).not.toBe(checked.txHash);
  });

  it("accepts a submitJobFor sent by an authorized delegate of the payer into the payer's session", async () => {
    const delegated = view({}, [[owner, stranger]]);
    await expect(checkPendingJob(await offer({ signer: stranger }), delegated)).resolves.toBeDefined();
  });

  it('accepts a submitJobFor the service sends for a payer into its own session, also through its operator', async () => {
    // The owner plays the service: the session is its own, the payer authorized it.
    const serviceSession = view({}, [[payer, owner]]);
    for (const signer of [owner, operator]) {
      const checked = await checkPendingJob(
        await offer({ signer, data: submitJobFor(payer.address) }),
        serviceSession,
      );
      expect(checked.sender).toBe(signer.address);
    }
  });

  it("declines a payer's own submission into the service's session (it would take the service's job id)", async () => {
    const serviceSession = view({}, [[payer, owner]]);
    expect(
      await rejection(
        checkPendingJob(await offer({ signer: payer, data: submitJobFor(payer.address) }), serviceSession),
      ),
    ).toBe('wrong_sender');
    // Naming the service as payer: the payer is no delegate of the service.
    expect(
      await rejection(
        checkPendingJob(await offer({ signer: payer, data: submitJobFor(owner.address) }), serviceSession),
      ),
    ).toBe('wrong_sender');
  });

  it('declines a submitJobFor into the sender’s own session for a payer that did not authorize it', async () => {
    const otherPayer = view({}, [[stranger, owner]]);
    expect(
      await rejection(checkPendingJob(await offer({ data: submitJobFor(payer.address) }), otherPayer)),
    ).toBe('wrong_sender');
    // Nor into a session of neither: a delegate of the payer sending into the owner's session.
    const delegateOfPayer = view({}, [[payer, stranger]]);
    expect(
      await rejection(
        checkPendingJob(
          await offer({ signer: stranger, data: submitJobFor(payer.address) }),
          delegateOfPayer,
        ),
      ),
    ).toBe('wrong_sender');
  });

  it('accepts a submitJobWithDebit from the session owner, its operator or a facilitator it authorized; declines the payer and strangers', async () => {
    const facilitated = view({}, [[owner, stranger]]);
    for (const signer of [owner, operator, stranger]) {
      await expect(
        checkPendingJob(await offer({ signer, data: submitJobWithDebit() }), facilitated),
      ).resolves.toBeDefined();
    }
    // The payer authorized the owner, not the other way round: it may not settle into the owner's session.
    const keyed = view({}, [[payer, owner]]);
    for (const signer of [payer, stranger]) {
      expect(
        await rejection(checkPendingJob(await offer({ signer, data: submitJobWithDebit() }), keyed)),
      ).toBe('wrong_sender');
    }
  });

  it('refuses a sidecar whose commitment is not the transaction’s blob', async () => {
    const other = blobSidecarOf(new TextEncoder().encode('another prompt'));
    expect(await rejection(checkPendingJob(await offer({ blobHash: other.versionedHash }), view()))).toBe(
      'blob_mismatch',
    );
    const swapped = { ...(await offer()), commitment: other.commitment };
    expect(await rejection(checkPendingJob(swapped, view()))).toBe('blob_mismatch');
  });

  it('refuses a blob that is not the committed one, or not a blob at all', async () => {
    const other = blobSidecarOf(new TextEncoder().encode('another prompt'));
    const badBlob = { ...(await offer()), blob: other.data };
    expect(await rejection(checkPendingJob(badBlob, view()))).toBe('blob_mismatch');
    const cut = { ...(await offer()), blob: sidecar.data.subarray(0, 1000) };
    expect(await rejection(checkPendingJob(cut, view()))).toBe('blob_mismatch');
    const notCanonical = { ...(await offer()), blob: new Uint8Array(sidecar.data.length).fill(0xff) };
    expect(await rejection(checkPendingJob(notCanonical, view()))).toBe('blob_mismatch');
  });

  it('refuses a stranger, another contract, another session, worker or job id, and non-submissions', async () => {
    expect(await rejection(checkPendingJob(await offer({ signer: stranger }), view()))).toBe('wrong_sender');
    expect(await rejection(checkPendingJob(await offer({ to: WORKER }), view()))).toBe('wrong_contract');
    expect(await rejection(checkPendingJob(await offer(), view({ worker: owner.address })))).toBe(
      'session_not_ours',
    );
    expect(await rejection(checkPendingJob(await offer({ jobId: JOB_ID + 1n }), view()))).toBe(
      'wrong_job_id',
    );
    const otherSession = jobRegistryInterface.encodeFunctionData('submitJobFor', [
      owner.address,
      SESSION_ID + 1n,
      JOB_ID,
      1n,
      0,
      0,
    ]);
    expect(await rejection(checkPendingJob(await offer({ data: otherSession }), view()))).toBe(
      'wrong_session',
    );
    const failJob = jobRegistryInterface.encodeFunctionData('failJob', [JOB_ID]);
    expect(await rejection(checkPendingJob(await offer({ data: failJob }), view()))).toBe('not_a_submission');
    const garbage = { ...(await offer()), rawTransaction: new Uint8Array([3, 1, 2]) };
    expect(await rejection(checkPendingJob(garbage, view()))).toBe('malformed_transaction');
  });
});

describe('checkPendingJob, a batch of submissions (docs/protocol.md, Batches)', () => {
  const submission = (jobId: bigint, blobIndex: number, promptIndex: number, sessionId = SESSION_ID) =>
    jobRegistryInterface.encodeFunctionData('submitJobFor', [
      owner.address,
      sessionId,
      jobId,
      10n ** 15n,
      blobIndex,
      promptIndex,
    ]);
  const batch = (...calls: string[]) => jobRegistryInterface.encodeFunctionData('batch', [calls]);
  const otherBlob = `0x01${'ab'.repeat(31)}`;
  const otherJob = ((SESSION_ID + 1n) << 32n) | 1n;

  it('takes the one call of the batch that submits the offered job, and the blob and payload it names', async () => {
    const data = batch(submission(otherJob, 0, 0, SESSION_ID + 1n), submission(JOB_ID, 1, 2));
    const checked = await checkPendingJob(
      await offer({ data, blobHashes: [otherBlob, sidecar.versionedHash] }),
      view(),
    );
    expect(checked).toMatchObject({ jobId: JOB_ID, promptBlobHash: sidecar.versionedHash, promptIndex: 2 });
  });

  it('refuses a batch that does not submit the job exactly once, or whose named blob is not the one handed over', async () => {
    const blobs = { blobHashes: [otherBlob, sidecar.versionedHash] };
    const without = batch(submission(otherJob, 0, 0, SESSION_ID + 1n));
    expect(await rejection(checkPendingJob(await offer({ data: without, ...blobs }), view()))).toBe(
      'wrong_job_id',
    );
    const twice = batch(submission(JOB_ID, 1, 0), submission(JOB_ID, 1, 1));
    expect(await rejection(checkPendingJob(await offer({ data: twice, ...blobs }), view()))).toBe(
      'wrong_job_id',
    );
    const otherBlobNamed = batch(submission(JOB_ID, 0, 0));
    expect(await rejection(checkPendingJob(await offer({ data: otherBlobNamed, ...blobs }), view()))).toBe(
      'blob_mismatch',
    );
    const pastTheBlobs = batch(submission(JOB_ID, 2, 0));
    expect(await rejection(checkPendingJob(await offer({ data: pastTheBlobs, ...blobs }), view()))).toBe(
      'blob_mismatch',
    );
  });
});

describe('UnconfirmedWork', () => {
  it('holds one unconfirmed job per session and a few per link', () => {
    const work = new UnconfirmedWork({ perLink: 2 });
    work.take(1n << 32n, 1n);
    expect(() => work.take((1n << 32n) + 1n, 1n)).toThrow(PendingJobRejectedError);
    work.take(2n << 32n, 2n);
    expect(() => work.take(3n << 32n, 3n)).toThrow('too many unconfirmed jobs');
    work.release(1n << 32n);
    work.take(3n << 32n, 3n);
    expect(work.size).toBe(2);
  });
});
