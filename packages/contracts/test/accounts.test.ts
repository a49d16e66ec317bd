import { describe, expect, it } from '@jest/globals';
import { Interface, MaxUint256, parseEther, ZeroAddress } from 'ethers';
import { jobRegistryInterface } from '../src/connect.js';
import { decodeRevertData, findRevertData } from '../src/errors.js';
import { reentrantAccountAbi } from './gen/index.js';
import { useChain } from './support/chain.js';
import { deployReentrantAccount } from './support/reentrant.js';
import { expectRevert } from './support/revert.js';
import { DEPLOY_CONFIG, SPEND_CUT_DELAY, eventOf, eventsOf, mined, withdrawNow } from './support/scenario.js';

const reentrantAccountInterface = new Interface(reentrantAccountAbi);

describe('principals and operators', () => {
  const chain = useChain(DEPLOY_CONFIG, undefined, { sendsBlobs: false });

  it('an offered operator acts for its principal once it accepts, until removed', async () => {
    const { address } = chain();
    const offer = await mined(chain().jobs('service').setOperator(address.operator, true));
    expect(eventOf(offer, 'OperatorOffered').operator).toBe(address.operator);
    expect(await chain().jobs('stranger').isOperatorOffered(address.service, address.operator)).toBe(true);
    expect(await chain().jobs('stranger').principalOf(address.operator)).toBe(address.operator);

    const accepted = await mined(chain().jobs('operator').acceptOperator(address.service));
    expect(eventOf(accepted, 'OperatorSet').toObject()).toEqual({
      principal: address.service,
      operator: address.operator,
      allowed: true,
    });
    expect(await chain().jobs('stranger').principalOf(address.operator)).toBe(address.service);
    expect(await chain().jobs('stranger').principalOf(address.service)).toBe(address.service);

    // What the operator deposits and withdraws is the principal's.
    await mined(chain().jobs('operator').deposit({ value: 1_000n }));
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.service)).toBe(1_000n);
    expect(await chain().jobs('stranger').prepaidBalanceOf(address.operator)).toBe(0n);
    const before = await chain().provider.getBalance(address.service);
    await withdrawNow(chain(), 'operator', 400n);
    expect(await chain().provider.getBalance(address.service)).toBe(before + 400n);

    const removed = await mined(chain().jobs('service').setOperator(address.operator, false));
    expect(eventOf(removed, 'OperatorSet').allowed).toBe(false);
    expect(await chain().jobs('stranger').principalOf(address.operator)).toBe(address.operator);
  });

  it('an operator of one principal cannot be named by another, nor accept twice', async () => {
    const { address } = chain();
    await mined(chain().jobs('service').setOperator(address.operator, true));
    await mined(chain().jobs('user').setOperator(address.operator, true));
    await mined(chain().jobs('operator').acceptOperator(address.service));
    await expectRevert(chain().jobs('otherUser').setOperator(address.operator, true), 'OperatorTaken', {
      operator: address.operator,
      principal: address.service,
    });
    await expectRevert(chain().jobs('operator').acceptOperator(address.user), 'OperatorTaken', {
      operator: address.operator,
      principal: address.service,
    });
  });

  it('refuses zero, self, unoffered and chained operators', async () => {
    const { address } = chain();
    await expectRevert(chain().jobs('service').setOperator(ZeroAddress, true), 'InvalidOperator', {
      operator: ZeroAddress,
    });
    await expectRevert(chain().jobs('service').setOperator(address.service, true), 'InvalidOperator');
    await expectRevert(chain().jobs('operator').acceptOperator(address.service), 'NoOperatorOffer', {
      principal: address.service,
      operator: address.operator,
    });
    await expectRevert(chain().jobs('service').setOperator(address.operator, false), 'NotOperatorOf', {
      principal: address.service,
      operator: address.operator,
    });

    await mined(chain().jobs('service').setOperator(address.operator, true));
    await mined(chain().jobs('operator').acceptOperator(address.service));
    // An operator names no operators of its own...
    await expectRevert(chain().jobs('operator').setOperator(address.stranger, true), 'CallerIsOperator', {
      caller: address.operator,
      principal: address.service,
    });
    // ...and a principal with operators does not become someone's operator.
    await mined(chain().jobs('user').setOperator(address.service, true));
    await expectRevert(chain().jobs('service').acceptOperator(address.user), 'PrincipalHasOperators', {
      account: address.service,
    });
    // An offer made before the offering principal became an operator is void.
    await mined(chain().jobs('stranger').setOperator(address.facilitator, true));
    await mined(chain().jobs('otherUser').setOperator(address.stranger, true));
    await mined(chain().jobs('stranger').acceptOperator(address.otherUser));
    await expectRevert(chain().jobs('facilitator').acceptOperator(address.stranger), 'CallerIsOperator', {
      caller: address.stranger,
      principal: address.otherUser,
    });
  });

  it('withdrawing a pending offer stops it from being accepted', async () => {
    const { address } = chain();
    await mined(chain().jobs('service').setOperator(address.operator, true));
    await mined(chain().jobs('service').setOperator(address.operator, false));
    await expectRevert(chain().jobs('operator').acceptOperator(address.service), 'NoOperatorOffer');
  });
});

describe('prepaid balances and delegates', () => {
  const chain = useChain(DEPLOY_CONFIG, undefined, { sendsBlobs: false });

  it('deposit credits the balance with Deposited; zero is refused', async () => {
    const { address } = chain();
    const jobs = chain().jobs('user');
    const first = eventOf(await mined(jobs.deposit({ value: 700n })), 'Deposited');
    expect(first.toObject()).toEqual({ user: address.user, amount: 700n, newBalance: 700n });
    const second = eventOf(await mined(jobs.deposit({ value: 300n })), 'Deposited');
    expect(second.newBalance).toBe(1_000n);
    expect(await jobs.prepaidBalanceOf(address.user)).toBe(1_000n);
    await expectRevert(jobs.deposit({ value: 0n }), 'ZeroAmount');
  });

  it('depositAndAuthorize adds balance, authorizes and raises the allowance by the value', async () => {
    const { address } = chain();
    const jobs = chain().jobs('user');
    const receipt = await mined(jobs.depositAndAuthorize(address.service, { value: 500n }));
    expect(eventOf(receipt, 'Deposited').newBalance).toBe(500n);
    expect(eventOf(receipt, 'DelegateAuthorizationSet').authorized).toBe(true);
    expect(eventOf(receipt, 'DelegateAllowanceSet').allowance).toBe(500n);
    const again = await mined(jobs.depositAndAuthorize(address.service, { value: 250n }));
    expect(eventsOf(again, 'DelegateAuthorizationSet')).toHaveLength(0);
    expect(await jobs.delegateAllowance(address.user, address.service)).toBe(750n);
    expect(await jobs.isDelegateAuthorized(address.user, address.service)).toBe(true);
    expect(await jobs.prepaidBalanceOf(address.user)).toBe(750n);
    expect(await jobs.delegateAllowanceEpoch(address.user, address.service)).toBe(0n);
    await expectRevert(jobs.depositAndAuthorize(address.service, { value: 0n }), 'ZeroAmount');
    await expectRevert(jobs.depositAndAuthorize(ZeroAddress, { value: 1n }), 'InvalidDelegate', {
      delegate: ZeroAddress,
    });
    await expectRevert(jobs.depositAndAuthorize(address.user, { value: 1n }), 'InvalidDelegate', {
      delegate: address.user,
    });
  });

  it('setDelegateAllowance is absolute and starts a new epoch; revoking zeroes the allowance', async () => {
    const { address } = chain();
    const jobs = chain().jobs('user');
    await mined(jobs.depositAndAuthorize(address.service, { value: 500n }));
    const set = await mined(jobs.setDelegateAllowance(address.service, 200n));
    expect(eventOf(set, 'DelegateAllowanceSet').toObject()).toEqual({
      user: address.user,
      delegate: address.service,
      allowance: 200n,
    });
    expect(await jobs.delegateAllowance(address.user, address.service)).toBe(200n);
    expect(await jobs.delegateAllowanceEpoch(address.user, address.service)).toBe(1n);

    const revoked = await mined(jobs.setDelegateAuthorization(address.service, false));
    expect(eventOf(revoked, 'DelegateAuthorizationSet').authorized).toBe(false);
    expect(eventOf(revoked, 'DelegateAllowanceSet').allowance).toBe(0n);
    expect(await jobs.isDelegateAuthorized(address.user, address.service)).toBe(false);
    expect(await jobs.delegateAllowance(address.user, address.service)).toBe(0n);
    expect(await jobs.delegateAllowanceEpoch(address.user, address.service)).toBe(2n);

    await mined(jobs.setDelegateAuthorization(address.service, true));
    expect(await jobs.isDelegateAuthorized(address.user, address.service)).toBe(true);
    await expectRevert(jobs.setDelegateAuthorization(ZeroAddress, true), 'InvalidDelegate');
    await expectRevert(jobs.setDelegateAllowance(address.user, 1n), 'InvalidDelegate');
  });

  it('an "unlimited" allowance (2^256 - 1) is kept as 2^128 - 1 wei, and raising it past that keeps it there', async () => {
    const { address } = chain();
    const jobs = chain().jobs('user');
    const KEPT = 2n ** 128n - 1n;
    const set = await mined(jobs.setDelegateAllowance(address.service, MaxUint256));
    expect(eventOf(set, 'DelegateAllowanceSet').allowance).toBe(KEPT);
    expect(await jobs.delegateAllowance(address.user, address.service)).toBe(KEPT);
    await mined(jobs.depositAndAuthorize(address.service, { value: 500n }));
    expect(await jobs.delegateAllowance(address.user, address.service)).toBe(KEPT);
    // The epoch and the authorization beside it in the grant's slot are untouched by the narrower field.
    expect(await jobs.delegateAllowanceEpoch(address.user, address.service)).toBe(1n);
    expect(await jobs.isDelegateAuthorized(address.user, address.service)).toBe(true);
    await mined(jobs.setDelegateAllowance(address.service, KEPT - 1n));
    expect(await jobs.delegateAllowance(address.user, address.service)).toBe(KEPT - 1n);
    expect(await jobs.delegateAllowanceEpoch(address.user, address.service)).toBe(2n);
  });

  it('a withdrawal is requested, leaves prepaidBalanceOf at once and is paid out only after SPEND_CUT_DELAY', async () => {
    const { address, clock } = chain();
    const jobs = chain().jobs('user');
    expect(await jobs.SPEND_CUT_DELAY()).toBe(BigInt(SPEND_CUT_DELAY));
    await mined(jobs.deposit({ value: 1_000n }));
    const requested = await mined(jobs.requestWithdrawal(300n));
    const availableAt = BigInt((await clock.now()) + SPEND_CUT_DELAY);
    expect(eventOf(requested, 'WithdrawalRequested').toObject()).toEqual({
      user: address.user,
      amount: 300n,
      availableAt,
    });
    // Asking again adds up and starts the delay again; more than the balance is refused.
    await mined(jobs.requestWithdrawal(100n));
    await expectRevert(jobs.requestWithdrawal(601n), 'InsufficientBalance', { required: 1_001n });
    const [amount, again] = await jobs.withdrawalRequestOf(address.user);
    expect(amount).toBe(400n);
    expect(again).toBeGreaterThan(availableAt);
    expect(await jobs.prepaidBalanceOf(address.user)).toBe(600n);
    await expectRevert(jobs.withdrawBalance(400n), 'WithdrawalNotAvailable', {
      user: address.user,
      requested: 400n,
      availableAt: again,
    });
    await clock.advance(SPEND_CUT_DELAY);
    await expectRevert(jobs.withdrawBalance(401n), 'WithdrawalNotAvailable');
    await mined(jobs.withdrawBalance(150n));
    expect(await jobs.withdrawalRequestOf(address.user)).toEqual([250n, again]);
    expect(await jobs.prepaidBalanceOf(address.user)).toBe(600n);
  });

  it('withdrawBalance pays out with Withdrew; more than the balance or zero is refused', async () => {
    const { address, provider } = chain();
    const jobs = chain().jobs('user');
    await mined(jobs.deposit({ value: parseEther('1') }));
    await mined(jobs.requestWithdrawal(parseEther('1')));
    await chain().clock.advance(SPEND_CUT_DELAY);
    const before = await provider.getBalance(address.user);
    const receipt = await mined(jobs.withdrawBalance(parseEther('0.4')));
    expect(eventOf(receipt, 'Withdrew').toObject()).toEqual({
      user: address.user,
      amount: parseEther('0.4'),
      newBalance: parseEther('0.6'),
    });
    const gas = receipt.gasUsed * receipt.gasPrice;
    expect(await provider.getBalance(address.user)).toBe(before + parseEther('0.4') - gas);
    await expectRevert(jobs.withdrawBalance(parseEther('0.7')), 'WithdrawalNotAvailable', {
      user: address.user,
      requested: parseEther('0.6'),
    });
    await expectRevert(jobs.withdrawBalance(0n), 'ZeroAmount');
  });

  it('a payout the receiver refuses reverts the withdrawal with TransferFailed', async () => {
    const { deployment } = chain();
    const account = await deployReentrantAccount(chain(), 'stranger');
    const registry = deployment.jobRegistryAddress;
    await mined(
      account.execute(registry, 500n, jobRegistryInterface.encodeFunctionData('deposit'), { value: 500n }),
    );
    await mined(
      account.execute(registry, 0n, jobRegistryInterface.encodeFunctionData('requestWithdrawal', [200n])),
    );
    await chain().clock.advance(SPEND_CUT_DELAY);
    await mined(account.setRefusesPayments(true));
    const failure = await account
      .execute(registry, 0n, jobRegistryInterface.encodeFunctionData('withdrawBalance', [200n]))
      .catch((error: unknown) => error);
    // The account wraps the registry's revert in CallFailed(bytes); the inner error is the registry's.
    const reason = reentrantAccountInterface.decodeErrorResult(
      'CallFailed',
      findRevertData(failure)!,
    )[0] as string;
    expect(decodeRevertData(reason)).toEqual({
      name: 'TransferFailed',
      args: { to: await account.getAddress(), amount: 200n },
    });
    expect(
      await chain()
        .jobs('stranger')
        .withdrawalRequestOf(await account.getAddress()),
    ).toEqual([200n, expect.any(BigInt)]);
    expect(
      await chain()
        .jobs('stranger')
        .prepaidBalanceOf(await account.getAddress()),
    ).toBe(300n);
  });

  it('a withdrawal cannot be re-entered, not even into another withdrawal', async () => {
    const { deployment } = chain();
    const account = await deployReentrantAccount(chain(), 'stranger');
    const accountAddress = await account.getAddress();
    const registry = deployment.jobRegistryAddress;
    await mined(
      account.execute(registry, 1_000n, jobRegistryInterface.encodeFunctionData('deposit'), {
        value: 1_000n,
      }),
    );
    await mined(
      account.execute(registry, 0n, jobRegistryInterface.encodeFunctionData('requestWithdrawal', [1_000n])),
    );
    await chain().clock.advance(SPEND_CUT_DELAY);

    for (const reentry of [
      jobRegistryInterface.encodeFunctionData('withdrawBalance', [400n]),
      jobRegistryInterface.encodeFunctionData('withdrawEarnings'),
    ]) {
      await mined(account.armReentry(registry, reentry));
      await mined(
        account.execute(registry, 0n, jobRegistryInterface.encodeFunctionData('withdrawBalance', [300n])),
      );
      expect(await account.reentered()).toBe(false);
      expect(decodeRevertData(await account.reentryResult())?.name).toBe('ReentrancyGuardReentrantCall');
    }
    // Two withdrawals of 300 went through; the nested attempts took nothing.
    expect(await account.received()).toBe(600n);
    expect((await chain().jobs('stranger').withdrawalRequestOf(accountAddress))[0]).toBe(400n);
  });
});
