import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { parseEther, Wallet } from 'ethers';
import { modelIdOf } from '@svc/contracts';
import { createLogger } from '@svc/platform';
import { useDevnet } from '@svc/testkit';
import { connectWorkerChain, type WorkerChain } from '../../src/chain/worker-chain.js';
import {
  WorkerDeregisteredError,
  ensureWorkerRegistered,
} from '../../src/registration/worker-registration.js';
import { DEPLOYED_MODELS, MODEL, OTHER_MODEL } from '../support/models.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS, snapshots: true });
const logger = createLogger({ service: 'worker-test', level: 'fatal' });
let worker: WorkerChain;

beforeEach(async () => {
  const { provider, deployment, wallet } = devnet();
  const key = Wallet.createRandom();
  await (await wallet(1).sendTransaction({ to: key.address, value: parseEther('10') })).wait();
  worker = connectWorkerChain({
    provider,
    wallet: new Wallet(key.privateKey),
    jobRegistryAddress: deployment.jobRegistryAddress,
    workerRegistryAddress: deployment.workerRegistryAddress,
    pollIntervalMs: 25,
  });
});

afterEach(async () => {
  await worker.close();
});

function register(models: string[], stakeWei = parseEther('1')) {
  return ensureWorkerRegistered({
    chain: worker.chain,
    transactions: worker.transactions,
    worker: worker.address,
    models,
    stakeWei,
    logger,
  });
}

describe('ensureWorkerRegistered', () => {
  it('registers a new worker with its stake and models', async () => {
    const outcome = await register([MODEL.name]);
    expect(outcome.steps).toEqual(['registered']);
    expect(await worker.chain.isWorkerActive(worker.address)).toBe(true);
    expect(await worker.chain.stakeOf(worker.address)).toBe(parseEther('1'));
    expect(await worker.chain.workerServes(worker.address, modelIdOf(MODEL.name))).toBe(true);
  });

  it('re-uses the registration on a restart and changes nothing when the models are the same', async () => {
    await register([MODEL.name, OTHER_MODEL.name]);
    const before = await devnet().provider.getTransactionCount(worker.address);
    const outcome = await register([OTHER_MODEL.name, MODEL.name]);
    expect(outcome.steps).toEqual([]);
    expect(await devnet().provider.getTransactionCount(worker.address)).toBe(before);
  });

  it('replaces the model set when it changed', async () => {
    await register([MODEL.name]);
    const outcome = await register([OTHER_MODEL.name]);
    expect(outcome.steps).toEqual(['models-updated']);
    expect(await worker.chain.workerServes(worker.address, modelIdOf(OTHER_MODEL.name))).toBe(true);
    expect(await worker.chain.workerServes(worker.address, modelIdOf(MODEL.name))).toBe(false);
  });

  it('tops up a stake below the configured one', async () => {
    await register([MODEL.name], parseEther('1'));
    const outcome = await register([MODEL.name], parseEther('1.5'));
    expect(outcome.steps).toEqual(['stake-topped-up']);
    expect(await worker.chain.stakeOf(worker.address)).toBe(parseEther('1.5'));
  });

  it('refuses to serve under a deregistered key', async () => {
    await register([MODEL.name]);
    await (await worker.chain.workerRegistry.connect(worker.wallet).deregister()).wait();
    await expect(register([MODEL.name])).rejects.toBeInstanceOf(WorkerDeregisteredError);
  });
});
