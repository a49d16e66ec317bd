import { describe, expect, it } from '@jest/globals';
import { keccak256, parseEther, toUtf8Bytes, ZeroAddress } from 'ethers';
import { deployContracts } from '../src/deploy.js';
import { modelIdOf } from '../src/modelId.js';
import { DEFAULT_PROTOCOL_PARAMETERS, fromParametersStruct, toParametersStruct } from '../src/parameters.js';
import { useChain } from './support/chain.js';
import { expectRevert } from './support/revert.js';
import {
  DEPLOY_CONFIG,
  MODEL,
  MODEL_ID,
  OTHER_MODEL,
  OTHER_MODEL_ID,
  eventOf,
  mined,
} from './support/scenario.js';

describe('deployContracts', () => {
  const chain = useChain(DEPLOY_CONFIG, undefined, { sendsBlobs: false });

  it('links the two contracts and owns both', async () => {
    const { deployment, address } = chain();
    expect(await deployment.workerRegistry.jobRegistry()).toBe(deployment.jobRegistryAddress);
    expect(await deployment.jobRegistry.workerRegistry()).toBe(deployment.workerRegistryAddress);
    expect(await deployment.jobRegistry.owner()).toBe(address.owner);
    expect(await deployment.workerRegistry.owner()).toBe(address.owner);
    expect(deployment.deploymentBlock).toBeGreaterThan(0);
  });

  it('sets the architecture defaults, readable back from the chain', async () => {
    const { deployment } = chain();
    const onChain = fromParametersStruct(await deployment.jobRegistry.parameters());
    expect(onChain).toEqual(DEFAULT_PROTOCOL_PARAMETERS);
    expect(onChain).toMatchObject({
      claimWindowSeconds: 30,
      jobTimeoutSeconds: 120,
      inactivityTimeoutSeconds: 1800,
      maxAttempts: 2,
    });
    expect(await deployment.workerRegistry.minStake()).toBe(deployment.staking.minStakeWei);
    expect(await deployment.workerRegistry.unbondingDelay()).toBe(
      BigInt(deployment.staking.unbondingDelaySeconds),
    );
    expect(await deployment.jobRegistry.worstCaseLiability()).toBe(120n + 900n);
  });

  it('configures each model under keccak256 of its exact name, colon included', async () => {
    const { deployment } = chain();
    expect(MODEL_ID).toBe(keccak256(toUtf8Bytes('llama3.2:1b')));
    expect(deployment.models.map((model) => model.modelId)).toEqual([MODEL_ID, OTHER_MODEL_ID]);
    expect(await deployment.jobRegistry.jobFee(MODEL_ID)).toBe(MODEL.feeWei);
    expect(await deployment.jobRegistry.jobFee(OTHER_MODEL_ID)).toBe(OTHER_MODEL.feeWei);
    expect(await deployment.jobRegistry.jobFee(modelIdOf('llama3.2'))).toBe(0n);
    expect(await deployment.jobRegistry.modelIds()).toEqual([MODEL_ID, OTHER_MODEL_ID]);
    expect(await deployment.jobRegistry.modelName(MODEL_ID)).toBe(MODEL.name);
    expect(() => modelIdOf('')).toThrow();
  });

  it('deploys with custom parameters, and refuses an unbonding delay shorter than job timeout + dispute window', async () => {
    const { signers } = chain();
    const custom = await deployContracts(signers.stranger, {
      protocol: { jobTimeoutSeconds: 60, disputeWindowSeconds: 60, maxAttempts: 3 },
      staking: { minStakeWei: parseEther('1'), unbondingDelaySeconds: 120 },
    });
    expect(fromParametersStruct(await custom.jobRegistry.parameters())).toMatchObject({
      jobTimeoutSeconds: 60,
      disputeWindowSeconds: 60,
      maxAttempts: 3,
    });
    expect(await custom.workerRegistry.minStake()).toBe(parseEther('1'));
    await expectRevert(
      deployContracts(signers.stranger, {
        protocol: { jobTimeoutSeconds: 60, disputeWindowSeconds: 61 },
        staking: { unbondingDelaySeconds: 120 },
      }),
      'UnbondingDelayTooShort',
      { required: 121n, actual: 120n },
    );
  });
});

describe('owner configuration', () => {
  const chain = useChain(DEPLOY_CONFIG, undefined, { sendsBlobs: false });

  it('setModel emits ModelConfigured; fee 0 disables; names must not be empty; fees fit 64 bits', async () => {
    const jobs = chain().jobs('owner');
    const receipt = await mined(jobs.setModel('mistral:7b-instruct', 5n));
    const event = eventOf(receipt, 'ModelConfigured');
    expect(event.modelId).toBe(modelIdOf('mistral:7b-instruct'));
    expect(event.name).toBe('mistral:7b-instruct');
    expect(event.fee).toBe(5n);
    await mined(jobs.setModel(MODEL.name, 0n));
    expect(await jobs.jobFee(MODEL_ID)).toBe(0n);
    expect(await jobs.modelIds()).toHaveLength(3);
    await expectRevert(jobs.setModel('', 1n), 'EmptyModelName');
    // A job's fee packs beside its payer in 64 bits (up to 18.4 ether).
    await expectRevert(jobs.setModel('huge', 2n ** 64n), 'SafeCastOverflowedUintDowncast', { bits: 64n });
  });

  it('setParameters validates every field and emits ParametersSet', async () => {
    const jobs = chain().jobs('owner');
    const base = DEFAULT_PROTOCOL_PARAMETERS;
    const receipt = await mined(jobs.setParameters(toParametersStruct({ ...base, refundGraceSeconds: 42 })));
    expect(eventOf(receipt, 'ParametersSet').parameters.refundGrace).toBe(42n);
    expect((await jobs.parameters()).refundGrace).toBe(42n);
    const invalid: [Partial<typeof base>, string][] = [
      [{ claimWindowSeconds: 0 }, 'claimWindow'],
      [{ jobTimeoutSeconds: 0 }, 'jobTimeout'],
      [{ inactivityTimeoutSeconds: 0 }, 'inactivityTimeout'],
      [{ maxAttempts: 0 }, 'maxAttempts'],
      [{ protocolShareBps: 10_001 }, 'protocolShareBps'],
    ];
    for (const [change, name] of invalid) {
      await expectRevert(jobs.setParameters(toParametersStruct({ ...base, ...change })), 'InvalidParameter', {
        name,
      });
    }
    await expectRevert(
      jobs.setParameters(toParametersStruct({ ...base, disputeWindowSeconds: 86_400 })),
      'UnbondingDelayTooShort',
      { required: 86_520n, actual: 86_400n },
    );
  });

  it('WorkerRegistry settings: min stake above zero, unbonding delay covering disputes, JobRegistry linked once', async () => {
    const { deployment } = chain();
    const workers = chain().workers('owner');
    await mined(workers.setMinStake(parseEther('0.5')));
    expect(await workers.minStake()).toBe(parseEther('0.5'));
    await expectRevert(workers.setMinStake(0n), 'InvalidParameter', { name: 'minStake', value: 0n });
    await mined(workers.setUnbondingDelay(1_020n));
    expect(await workers.unbondingDelay()).toBe(1_020n);
    await expectRevert(workers.setUnbondingDelay(1_019n), 'UnbondingDelayTooShort', {
      required: 1_020n,
      actual: 1_019n,
    });
    await expectRevert(workers.setUnbondingDelay(0n), 'InvalidParameter', { name: 'unbondingDelay' });
    await expectRevert(workers.setJobRegistry(deployment.workerRegistryAddress), 'JobRegistryAlreadySet', {
      jobRegistry: deployment.jobRegistryAddress,
    });
  });

  it('ownership moves with OwnershipTransferred, never to the zero address, and can be renounced', async () => {
    const { address } = chain();
    for (const contract of [chain().jobs('owner'), chain().workers('owner')]) {
      await expectRevert(contract.transferOwnership(ZeroAddress), 'OwnableInvalidOwner', {
        owner: ZeroAddress,
      });
      const moved = eventOf(await mined(contract.transferOwnership(address.service)), 'OwnershipTransferred');
      expect(moved.toObject()).toEqual({ previousOwner: address.owner, newOwner: address.service });
      expect(await contract.owner()).toBe(address.service);
    }
    await mined(chain().jobs('service').renounceOwnership());
    expect(await chain().jobs('stranger').owner()).toBe(ZeroAddress);
    await expectRevert(chain().jobs('service').pause(), 'OwnableUnauthorizedAccount');
  });

  it('deployment emitted the WorkerRegistry settings and the link', async () => {
    const { deployment } = chain();
    const workers = deployment.workerRegistry;
    const [minStake] = await workers.queryFilter(workers.filters.MinStakeSet(), deployment.deploymentBlock);
    expect(minStake?.args.minStake).toBe(deployment.staking.minStakeWei);
    const [delay] = await workers.queryFilter(
      workers.filters.UnbondingDelaySet(),
      deployment.deploymentBlock,
    );
    expect(delay?.args.unbondingDelay).toBe(BigInt(deployment.staking.unbondingDelaySeconds));
    const [link] = await workers.queryFilter(workers.filters.JobRegistrySet(), deployment.deploymentBlock);
    expect(link?.args.jobRegistry).toBe(deployment.jobRegistryAddress);
  });

  it('only WorkerRegistry credits slashed stake', async () => {
    const { address } = chain();
    await expectRevert(
      chain().jobs('stranger').creditSlash(address.stranger, { value: 1n }),
      'NotWorkerRegistry',
      {
        caller: address.stranger,
      },
    );
  });

  it('only the owner configures', async () => {
    const { address } = chain();
    const jobs = chain().jobs('stranger');
    const workers = chain().workers('stranger');
    const notOwner = { account: address.stranger };
    await expectRevert(jobs.setModel('x', 1n), 'OwnableUnauthorizedAccount', notOwner);
    await expectRevert(
      jobs.setParameters(toParametersStruct(DEFAULT_PROTOCOL_PARAMETERS)),
      'OwnableUnauthorizedAccount',
      notOwner,
    );
    await expectRevert(jobs.pause(), 'OwnableUnauthorizedAccount', notOwner);
    await expectRevert(jobs.unpause(), 'OwnableUnauthorizedAccount', notOwner);
    await expectRevert(jobs.withdrawProtocolFees(address.stranger), 'OwnableUnauthorizedAccount', notOwner);
    await expectRevert(workers.setMinStake(1n), 'OwnableUnauthorizedAccount', notOwner);
    await expectRevert(workers.setUnbondingDelay(10_000n), 'OwnableUnauthorizedAccount', notOwner);
    await expectRevert(workers.setJobRegistry(address.stranger), 'OwnableUnauthorizedAccount', notOwner);
  });

  it('pause and unpause toggle; pausing twice or unpausing a running registry reverts', async () => {
    const { address } = chain();
    const jobs = chain().jobs('owner');
    expect(eventOf(await mined(jobs.pause()), 'Paused').account).toBe(address.owner);
    expect(await jobs.paused()).toBe(true);
    await expectRevert(jobs.pause(), 'EnforcedPause');
    expect(eventOf(await mined(jobs.unpause()), 'Unpaused').account).toBe(address.owner);
    expect(await jobs.paused()).toBe(false);
    await expectRevert(jobs.unpause(), 'ExpectedPause');
  });

  it('both contracts refuse plain ether and unknown calls', async () => {
    const { deployment, signers, address } = chain();
    for (const to of [deployment.jobRegistryAddress, deployment.workerRegistryAddress]) {
      await expectRevert(signers.stranger.sendTransaction({ to, value: 1n }), 'EtherNotAccepted', {
        sender: address.stranger,
        amount: 1n,
      });
      await expectRevert(signers.stranger.sendTransaction({ to, data: '0xdeadbeef' }), 'UnknownSelector', {
        selector: '0xdeadbeef',
      });
    }
  });
});
