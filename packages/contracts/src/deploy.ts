import { ContractFactory, type Signer } from 'ethers';
import { connectJobRegistry, connectWorkerRegistry } from './connect.js';
import { jobRegistryAbi, jobRegistryBytecode } from './gen/JobRegistry.js';
import { workerRegistryAbi, workerRegistryBytecode } from './gen/WorkerRegistry.js';
import type { JobRegistry, WorkerRegistry } from './gen/index.js';
import { modelIdOf } from './modelId.js';
import {
  DEFAULT_PROTOCOL_PARAMETERS,
  DEFAULT_STAKING_PARAMETERS,
  toParametersStruct,
  type ProtocolParameters,
  type StakingParameters,
} from './parameters.js';

export interface ModelFee {
  /** Exact model name as clients send it, e.g. `llama3.2:1b`. */
  name: string;
  feeWei: bigint;
}

export interface ConfiguredModel extends ModelFee {
  modelId: string;
}

export interface DeployConfig {
  protocol?: Partial<ProtocolParameters>;
  staking?: Partial<StakingParameters>;
  models?: ModelFee[];
}

export interface Deployment {
  jobRegistryAddress: string;
  workerRegistryAddress: string;
  /** Both contracts connected to the deploying signer, which owns them. */
  jobRegistry: JobRegistry;
  workerRegistry: WorkerRegistry;
  /** Block of the first deployment transaction: where log scans start. */
  deploymentBlock: number;
  protocol: ProtocolParameters;
  staking: StakingParameters;
  models: ConfiguredModel[];
}

/**
 * Deploys WorkerRegistry and JobRegistry, links them (JobRegistry is the only caller of `slash`),
 * sets the parameters and the models' fees. Every transaction is mined before the next is sent, with
 * nonces assigned here so a caching provider cannot hand out the same nonce twice.
 */
export async function deployContracts(signer: Signer, config: DeployConfig = {}): Promise<Deployment> {
  const protocol = { ...DEFAULT_PROTOCOL_PARAMETERS, ...config.protocol };
  const staking = { ...DEFAULT_STAKING_PARAMETERS, ...config.staking };
  let nonce = await signer.getNonce('pending');

  const workerFactory = new ContractFactory(workerRegistryAbi, workerRegistryBytecode, signer);
  const workerDeployment = await workerFactory.deploy(staking.minStakeWei, staking.unbondingDelaySeconds, {
    nonce: nonce++,
  });
  const workerReceipt = await workerDeployment.deploymentTransaction()?.wait();
  if (!workerReceipt) throw new Error('WorkerRegistry deployment was not mined');
  const workerRegistryAddress = await workerDeployment.getAddress();

  const jobFactory = new ContractFactory(jobRegistryAbi, jobRegistryBytecode, signer);
  const jobDeployment = await jobFactory.deploy(workerRegistryAddress, toParametersStruct(protocol), {
    nonce: nonce++,
  });
  await jobDeployment.waitForDeployment();
  const jobRegistryAddress = await jobDeployment.getAddress();

  const workerRegistry = connectWorkerRegistry(workerRegistryAddress, signer);
  const jobRegistry = connectJobRegistry(jobRegistryAddress, signer);
  await (await workerRegistry.setJobRegistry(jobRegistryAddress, { nonce: nonce++ })).wait();

  const models: ConfiguredModel[] = [];
  for (const model of config.models ?? []) {
    await (await jobRegistry.setModel(model.name, model.feeWei, { nonce: nonce++ })).wait();
    models.push({ ...model, modelId: modelIdOf(model.name) });
  }

  return {
    jobRegistryAddress,
    workerRegistryAddress,
    jobRegistry,
    workerRegistry,
    deploymentBlock: workerReceipt.blockNumber,
    protocol,
    staking,
    models,
  };
}
