import { describe, expect, it } from '@jest/globals';
import { Interface, parseEther } from 'ethers';
import { workerRegistryInterface } from '../src/connect.js';
import { decodeRevertData, findRevertData } from '../src/errors.js';
import { reentrantAccountAbi } from './gen/index.js';
import { useChain } from './support/chain.js';
import { deployReentrantAccount } from './support/reentrant.js';
import { expectRevert } from './support/revert.js';
import {
  DEPLOY_CONFIG,
  MODEL_ID,
  OTHER_MODEL_ID,
  STAKE,
  eventOf,
  mined,
  registerWorker,
} from './support/scenario.js';

const DAY = 24 * 60 * 60;

describe('WorkerRegistry', () => {
  const chain = useChain(DEPLOY_CONFIG, undefined, { sendsBlobs: false });

  it('register stakes, records the models and makes the worker active', async () => {
    const { address } = chain();
    const receipt = await registerWorker(chain(), 'worker', [MODEL_ID]);
    expect(eventOf(receipt, 'WorkerRegistered').toObject()).toEqual({ worker: address.worker, stake: STAKE });
    const modelsSet = eventOf(receipt, 'WorkerModelsSet');
    expect(modelsSet.worker).toBe(address.worker);
    expect([...modelsSet.modelIds]).toEqual([MODEL_ID]);
    const workers = chain().workers('stranger');
    expect(await workers.isActive(address.worker)).toBe(true);
    expect(await workers.serves(address.worker, MODEL_ID)).toBe(true);
    expect(await workers.serves(address.worker, OTHER_MODEL_ID)).toBe(false);
    expect(await workers.stakeOf(address.worker)).toBe(STAKE);
    expect(await workers.isActive(address.stranger)).toBe(false);
  });

  it('refuses a stake below the minimum and a second registration', async () => {
    const { address } = chain();
    await expectRevert(
      chain()
        .workers('worker')
        .register([MODEL_ID], { value: STAKE - 1n }),
      'StakeBelowMinimum',
      { required: STAKE, provided: STAKE - 1n },
    );
    await registerWorker(chain(), 'worker');
    await expectRevert(
      chain().workers('worker').register([MODEL_ID], { value: STAKE }),
      'AlreadyRegistered',
      {
        worker: address.worker,
      },
    );
  });

  it('setModels replaces the served set (duplicates collapse); unregistered callers are refused', async () => {
    const { address } = chain();
    await registerWorker(chain(), 'worker', [MODEL_ID]);
    const receipt = await mined(chain().workers('worker').setModels([OTHER_MODEL_ID, OTHER_MODEL_ID]));
    expect([...eventOf(receipt, 'WorkerModelsSet').modelIds]).toEqual([OTHER_MODEL_ID]);
    const workers = chain().workers('stranger');
    expect(await workers.serves(address.worker, MODEL_ID)).toBe(false);
    expect(await workers.serves(address.worker, OTHER_MODEL_ID)).toBe(true);
    expect(await workers.modelsOf(address.worker)).toEqual([OTHER_MODEL_ID]);
    await expectRevert(chain().workers('stranger').setModels([MODEL_ID]), 'NotRegistered', {
      worker: address.stranger,
    });
  });

  it('addStake raises the stake; zero or unregistered is refused; raising minStake deactivates until topped up', async () => {
    const { address } = chain();
    await registerWorker(chain(), 'worker');
    const receipt = await mined(chain().workers('worker').addStake({ value: 5n }));
    expect(eventOf(receipt, 'StakeAdded').toObject()).toEqual({
      worker: address.worker,
      amount: 5n,
      newStake: STAKE + 5n,
    });
    await expectRevert(chain().workers('worker').addStake({ value: 0n }), 'ZeroAmount');
    await expectRevert(chain().workers('stranger').addStake({ value: 1n }), 'NotRegistered');

    await mined(chain().workers('owner').setMinStake(parseEther('1')));
    expect(await chain().workers('stranger').isActive(address.worker)).toBe(false);
    await mined(
      chain()
        .workers('worker')
        .addStake({ value: parseEther('1') }),
    );
    expect(await chain().workers('stranger').isActive(address.worker)).toBe(true);
  });

  it('deregister stops new work at once; the stake returns only after the unbonding delay', async () => {
    const { address, clock, provider } = chain();
    await registerWorker(chain(), 'worker');
    const workers = chain().workers('worker');
    await expectRevert(workers.withdrawStake(), 'NotDeregistered', { worker: address.worker });
    const receipt = await mined(workers.deregister());
    expect(eventOf(receipt, 'WorkerDeregistered').worker).toBe(address.worker);
    const endsAt = await workers.unbondingEndsAt(address.worker);
    expect(endsAt).toBe(BigInt((await provider.getBlock(receipt.blockNumber))!.timestamp + DAY));
    expect(await workers.isActive(address.worker)).toBe(false);
    await expectRevert(workers.deregister(), 'AlreadyDeregistered', {
      worker: address.worker,
      unbondingEndsAt: endsAt,
    });
    await expectRevert(workers.withdrawStake(), 'StakeLocked', {
      worker: address.worker,
      unbondingEndsAt: endsAt,
    });

    await clock.setNextBlockTimestamp(Number(endsAt));
    await expectRevert(workers.withdrawStake(), 'StakeLocked');
    await clock.setNextBlockTimestamp(Number(endsAt) + 1);
    const before = await provider.getBalance(address.worker);
    const withdrawn = await mined(workers.withdrawStake());
    expect(eventOf(withdrawn, 'StakeWithdrawn').amount).toBe(STAKE);
    expect(await provider.getBalance(address.worker)).toBe(
      before + STAKE - withdrawn.gasUsed * withdrawn.gasPrice,
    );
    expect(await workers.stakeOf(address.worker)).toBe(0n);
    expect(await workers.serves(address.worker, MODEL_ID)).toBe(false);
    await expectRevert(workers.withdrawStake(), 'NotRegistered');
    await expectRevert(workers.deregister(), 'NotRegistered');
    // Having left, the worker may register afresh.
    await registerWorker(chain(), 'worker');
    expect(await workers.isActive(address.worker)).toBe(true);
  });

  it('only JobRegistry may slash', async () => {
    const { address } = chain();
    await registerWorker(chain(), 'worker');
    await expectRevert(chain().workers('owner').slash(address.worker, 1n, address.owner), 'NotJobRegistry', {
      caller: address.owner,
    });
  });

  it('an operator registers and manages its principal as the worker', async () => {
    const { address } = chain();
    await mined(chain().jobs('worker').setOperator(address.operator, true));
    await mined(chain().jobs('operator').acceptOperator(address.worker));
    await registerWorker(chain(), 'operator', [MODEL_ID]);
    const workers = chain().workers('stranger');
    expect(await workers.isActive(address.worker)).toBe(true);
    expect(await workers.isActive(address.operator)).toBe(false);
    await mined(chain().workers('operator').deregister());
    expect(await workers.isActive(address.worker)).toBe(false);
  });

  it('a stake the worker contract refuses stays put: TransferFailed', async () => {
    const { deployment, clock } = chain();
    const account = await deployReentrantAccount(chain(), 'stranger');
    const registry = deployment.workerRegistryAddress;
    const call = (name: 'register' | 'deregister' | 'withdrawStake', args: unknown[] = []) =>
      workerRegistryInterface.encodeFunctionData(name, args);
    await mined(account.execute(registry, STAKE, call('register', [[MODEL_ID]]), { value: STAKE }));
    await mined(account.execute(registry, 0n, call('deregister')));
    await clock.advance(DAY + 1);
    await mined(account.setRefusesPayments(true));
    const failure = await account
      .execute(registry, 0n, call('withdrawStake'))
      .catch((error: unknown) => error);
    const reason = new Interface(reentrantAccountAbi).decodeErrorResult(
      'CallFailed',
      findRevertData(failure)!,
    )[0];
    expect(decodeRevertData(reason as string)).toEqual({
      name: 'TransferFailed',
      args: { to: await account.getAddress(), amount: STAKE },
    });
    expect(
      await chain()
        .workers('stranger')
        .stakeOf(await account.getAddress()),
    ).toBe(STAKE);
  });

  it('withdrawStake cannot be re-entered', async () => {
    const { deployment, clock } = chain();
    const account = await deployReentrantAccount(chain(), 'stranger');
    const registry = deployment.workerRegistryAddress;
    const call = (name: 'register' | 'deregister' | 'withdrawStake', args: unknown[] = []) =>
      workerRegistryInterface.encodeFunctionData(name, args);
    await mined(account.execute(registry, STAKE, call('register', [[MODEL_ID]]), { value: STAKE }));
    await mined(account.execute(registry, 0n, call('deregister')));
    await clock.advance(DAY + 1);
    await mined(account.armReentry(registry, call('withdrawStake')));
    await mined(account.execute(registry, 0n, call('withdrawStake')));
    expect(await account.reentered()).toBe(false);
    expect(decodeRevertData(await account.reentryResult())?.name).toBe('ReentrancyGuardReentrantCall');
    expect(await account.received()).toBe(STAKE);
  });
});
