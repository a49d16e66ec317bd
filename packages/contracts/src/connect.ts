import { Contract, Interface, type ContractRunner } from 'ethers';
import { jobRegistryAbi } from './gen/JobRegistry.js';
import { workerRegistryAbi } from './gen/WorkerRegistry.js';
import type { JobRegistry, WorkerRegistry } from './gen/index.js';

/** A typed ethers contract for the JobRegistry at `address`. */
export function connectJobRegistry(address: string, runner?: ContractRunner | null): JobRegistry {
  return new Contract(address, jobRegistryAbi, runner) as unknown as JobRegistry;
}

/** A typed ethers contract for the WorkerRegistry at `address`. */
export function connectWorkerRegistry(address: string, runner?: ContractRunner | null): WorkerRegistry {
  return new Contract(address, workerRegistryAbi, runner) as unknown as WorkerRegistry;
}

export const jobRegistryInterface = new Interface(jobRegistryAbi);
export const workerRegistryInterface = new Interface(workerRegistryAbi);
