import { describe, expect, it } from '@jest/globals';
import { TypedDataEncoder, keccak256, toUtf8Bytes } from 'ethers';
import {
  DEBIT_AUTHORIZATION_TYPES,
  debitDomain,
  type DebitAuthorization,
} from '../src/debitAuthorization.js';
import { JobState } from '../src/states.js';
import { useChain, type Actor } from './support/chain.js';
import { expectRevert } from './support/revert.js';
import {
  DEPLOY_CONFIG,
  DEPOSIT,
  MODEL,
  callWithBlobs,
  eventOf,
  mined,
  openActiveSession,
  randomNonce,
  registerWorker,
  withdrawNow,
} from './support/scenario.js';
import { toCompact, toHighS } from './support/signatures.js';

const FEE = MODEL.feeWei;

describe('submitJobWithDebit (x402 prepaid-debit)', () => {
  const chain = useChain(DEPLOY_CONFIG, async (c) => {
    await registerWorker(c, 'worker');
    await registerWorker(c, 'otherWorker');
    await mined(c.jobs('user').deposit({ value: DEPOSIT }));
  });

  async function authorization(overrides: Partial<DebitAuthorization> = {}): Promise<DebitAuthorization> {
    const { address } = chain();
    return {
      payer: address.user,
      payTo: address.service,
      facilitator: address.service,
      maxAmount: FEE,
      deadline: BigInt((await chain().clock.now()) + 60),
      nonce: randomNonce(),
      ...overrides,
    };
  }

  function sign(
    auth: DebitAuthorization,
    options: { signer?: Actor; chainId?: number; verifyingContract?: string } = {},
  ): Promise<string> {
    const domain = debitDomain(
      options.chainId ?? chain().anvil.chainId,
      options.verifyingContract ?? chain().deployment.jobRegistryAddress,
    );
    return chain().signers[options.signer ?? 'user'].signTypedData(domain, DEBIT_AUTHORIZATION_TYPES, auth);
  }

  /** The service's own session, claimed by the worker. */
  const serviceSession = () => openActiveSession(chain(), { owner: 'service' });

  const settle = (by: Actor, sessionId: bigint, auth: DebitAuthorization, signature: string, blobs = 1) =>
    callWithBlobs(chain(), by, 'submitJobWithDebit', [sessionId, auth, signature], blobs);

  const balanceOf = (actor: Actor) => chain().jobs('stranger').prepaidBalanceOf(chain().address[actor]);

  it('debits the payer, submits the job in the service session and spends the nonce', async () => {
    const { address } = chain();
    const sessionId = await serviceSession();
    const auth = await authorization();
    const { receipt, versionedHashes } = await settle('service', sessionId, auth, await sign(auth));
    const submitted = eventOf(receipt, 'JobSubmitted');
    expect(submitted.toObject()).toEqual({
      jobId: (sessionId << 32n) | 1n,
      sessionId,
      payer: address.user,
      worker: address.worker,
      fee: FEE,
      promptBlobHash: versionedHashes[0],
      promptIndex: 0n,
    });
    expect(eventOf(receipt, 'DebitSettled').toObject()).toEqual({
      payer: address.user,
      nonce: auth.nonce,
      amount: FEE,
      jobId: (sessionId << 32n) | 1n,
    });
    expect(await balanceOf('user')).toBe(DEPOSIT - FEE);
    expect(await chain().jobs('stranger').isNonceUsed(address.user, auth.nonce)).toBe(true);
    const job = await chain()
      .jobs('stranger')
      .getJob((sessionId << 32n) | 1n);
    expect(job.payer).toBe(address.user);
    expect(job.state).toBe(BigInt(JobState.Submitted));
  });

  it('debits only the fee when maxAmount is higher', async () => {
    const sessionId = await serviceSession();
    const auth = await authorization({ maxAmount: FEE * 100n });
    const { receipt } = await settle('service', sessionId, auth, await sign(auth));
    expect(eventOf(receipt, 'DebitSettled').amount).toBe(FEE);
    expect(await balanceOf('user')).toBe(DEPOSIT - FEE);
  });

  it('a facilitator authorized as delegate of payTo settles, also through its operator', async () => {
    const { address } = chain();
    await mined(chain().jobs('service').setDelegateAuthorization(address.facilitator, true));
    const sessionId = await serviceSession();
    const direct = await authorization({ facilitator: address.facilitator });
    await settle('facilitator', sessionId, direct, await sign(direct));

    await mined(chain().jobs('facilitator').setOperator(address.operator, true));
    await mined(chain().jobs('operator').acceptOperator(address.facilitator));
    const viaOperator = await authorization({ facilitator: address.facilitator });
    const { receipt } = await settle('operator', sessionId, viaOperator, await sign(viaOperator));
    expect(eventOf(receipt, 'DebitSettled').nonce).toBe(viaOperator.nonce);
    expect(await balanceOf('user')).toBe(DEPOSIT - 2n * FEE);
  });

  it('refuses an expired authorization; one whose deadline is the block time is valid', async () => {
    const { clock, provider } = chain();
    const sessionId = await serviceSession();
    const now = await clock.now();
    const expired = await authorization({ deadline: BigInt(now) });
    await expectRevert(settle('service', sessionId, expired, await sign(expired)), 'DebitExpired', {
      deadline: BigInt(now),
      timestamp: BigInt(now + 1),
    });
    const exact = await authorization({ deadline: BigInt(now + 10) });
    await clock.setNextBlockTimestamp(now + 10);
    const { receipt } = await settle('service', sessionId, exact, await sign(exact));
    expect((await provider.getBlock(receipt.blockNumber))!.timestamp).toBe(now + 10);
  });

  it('refuses a caller that is not the named facilitator', async () => {
    const { address } = chain();
    const sessionId = await serviceSession();
    const auth = await authorization({ facilitator: address.facilitator });
    await expectRevert(settle('service', sessionId, auth, await sign(auth)), 'FacilitatorMismatch', {
      facilitator: address.facilitator,
      caller: address.service,
    });
  });

  it('refuses a payTo that does not own the session', async () => {
    const { address } = chain();
    const sessionId = await serviceSession();
    const auth = await authorization({ payTo: address.otherUser });
    await expectRevert(settle('service', sessionId, auth, await sign(auth)), 'RecipientMismatch', {
      payTo: address.otherUser,
      sessionOwner: address.service,
    });
  });

  it('refuses a facilitator that payTo has not authorized', async () => {
    const { address } = chain();
    const sessionId = await serviceSession();
    const auth = await authorization({ facilitator: address.facilitator });
    await expectRevert(settle('facilitator', sessionId, auth, await sign(auth)), 'FacilitatorNotAuthorized', {
      payTo: address.service,
      facilitator: address.facilitator,
    });
  });

  it("only the session's owner or its delegate settles into it: a payer's own debit, sent by the payer, debits nothing and spends no nonce", async () => {
    const { address } = chain();
    const jobs = chain().jobs('stranger');
    const sessionId = await serviceSession();
    const nextJobId = await jobs.nextJobId(sessionId);
    for (const sender of ['user', 'stranger'] as const) {
      // Naming itself facilitator passes the facilitator check; the session's owner never authorized it.
      const auth = await authorization({ facilitator: address[sender] });
      await expectRevert(settle(sender, sessionId, auth, await sign(auth)), 'FacilitatorNotAuthorized', {
        payTo: address.service,
        facilitator: address[sender],
      });
      // Naming the session's real facilitator fails on the sender instead.
      const forService = await authorization();
      await expectRevert(
        settle(sender, sessionId, forService, await sign(forService)),
        'FacilitatorMismatch',
        {
          facilitator: address.service,
          caller: address[sender],
        },
      );
      for (const spent of [auth, forService]) {
        expect(await jobs.isNonceUsed(address.user, spent.nonce)).toBe(false);
      }
    }
    expect(await balanceOf('user')).toBe(DEPOSIT);
    expect(await jobs.nextJobId(sessionId)).toBe(nextJobId);
  });

  it('refuses a replayed nonce', async () => {
    const { address } = chain();
    const sessionId = await serviceSession();
    const auth = await authorization({ maxAmount: FEE * 2n });
    const signature = await sign(auth);
    await settle('service', sessionId, auth, signature);
    await expectRevert(settle('service', sessionId, auth, signature), 'NonceAlreadyUsed', {
      payer: address.user,
      nonce: auth.nonce,
    });
    expect(await balanceOf('user')).toBe(DEPOSIT - FEE);
  });

  it('refuses a signature by anyone but the payer, or over another chain id or verifying contract', async () => {
    const { address, deployment } = chain();
    const sessionId = await serviceSession();
    const auth = await authorization();
    await expectRevert(
      settle('service', sessionId, auth, await sign(auth, { signer: 'otherUser' })),
      'DebitSignerMismatch',
      { payer: address.user, signer: address.otherUser },
    );
    for (const signature of [
      await sign(auth, { chainId: 1 }),
      await sign(auth, { verifyingContract: deployment.workerRegistryAddress }),
    ]) {
      const decoded = await expectRevert(
        settle('service', sessionId, auth, signature),
        'DebitSignerMismatch',
        {
          payer: address.user,
        },
      );
      expect(decoded.args.signer).not.toBe(address.user);
    }
    expect(await chain().jobs('stranger').isNonceUsed(address.user, auth.nonce)).toBe(false);
  });

  it('refuses a high-s signature, a 64-byte one and one that recovers no address', async () => {
    const sessionId = await serviceSession();
    const auth = await authorization();
    const signature = await sign(auth);
    const highS = toHighS(signature);
    await expectRevert(settle('service', sessionId, auth, highS.signature), 'ECDSAInvalidSignatureS', {
      s: highS.s,
    });
    await expectRevert(
      settle('service', sessionId, auth, toCompact(signature)),
      'ECDSAInvalidSignatureLength',
      {
        length: 64n,
      },
    );
    const invalidV = `${signature.slice(0, -2)}1d`;
    await expectRevert(settle('service', sessionId, auth, invalidV), 'ECDSAInvalidSignature');
    // The well-formed original still settles.
    await settle('service', sessionId, auth, signature);
  });

  it('refuses a fee above maxAmount and a balance short of the fee', async () => {
    const { address } = chain();
    const sessionId = await serviceSession();
    const underCap = await authorization({ maxAmount: FEE - 1n });
    await expectRevert(settle('service', sessionId, underCap, await sign(underCap)), 'FeeAboveMax', {
      fee: FEE,
      maxFee: FEE - 1n,
    });
    await withdrawNow(chain(), 'user', DEPOSIT - FEE + 1n);
    const auth = await authorization();
    await expectRevert(settle('service', sessionId, auth, await sign(auth)), 'InsufficientBalance', {
      user: address.user,
      required: FEE,
      available: FEE - 1n,
    });
  });

  it('needs the blob it names and stops while paused', async () => {
    const sessionId = await serviceSession();
    const auth = await authorization();
    const signature = await sign(auth);
    await expectRevert(settle('service', sessionId, auth, signature, 0), 'BlobMissing', { blobIndex: 0n });
    await mined(chain().jobs('owner').pause());
    await expectRevert(settle('service', sessionId, auth, signature), 'EnforcedPause');
  });

  it('exposes the EIP-712 domain and type the payer signs', async () => {
    const { deployment, anvil } = chain();
    const jobs = chain().jobs('stranger');
    expect(await jobs.domainSeparator()).toBe(
      TypedDataEncoder.hashDomain(debitDomain(anvil.chainId, deployment.jobRegistryAddress)),
    );
    expect(await jobs.DEBIT_AUTHORIZATION_TYPEHASH()).toBe(
      keccak256(
        toUtf8Bytes(
          'DebitAuthorization(address payer,address payTo,address facilitator,uint256 maxAmount,uint256 deadline,bytes32 nonce)',
        ),
      ),
    );
    const domain = await jobs.eip712Domain();
    expect(domain.name).toBe('JobRegistry');
    expect(domain.version).toBe('1');
  });

  it('a failed x402 job is reassigned by the service without a second debit, and refunds go to the payer', async () => {
    const { address } = chain();
    const sessionId = await serviceSession();
    const auth = await authorization();
    const { receipt } = await settle('service', sessionId, auth, await sign(auth));
    const jobId = eventOf(receipt, 'JobSubmitted').jobId as bigint;
    await mined(chain().jobs('worker').failJob(jobId));
    const next = await openActiveSession(chain(), { owner: 'service', worker: 'otherWorker' });
    await callWithBlobs(chain(), 'service', 'reassignJob', [jobId, next]);
    expect(await balanceOf('user')).toBe(DEPOSIT - FEE);
    await mined(chain().jobs('otherWorker').failJob(jobId));
    await mined(chain().jobs('service').refundJob(jobId));
    expect(await balanceOf('user')).toBe(DEPOSIT);
    expect(await balanceOf('service')).toBe(0n);
    expect(await chain().jobs('stranger').delegateAllowance(address.user, address.service)).toBe(0n);
  });
});
