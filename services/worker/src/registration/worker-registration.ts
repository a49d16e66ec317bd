import { ContractRevertError, type ChainClient } from '@svc/chain';
import { modelIdOf } from '@svc/contracts';
import type { Logger } from '@svc/platform';
import type { WorkerTransactions } from '../chain/worker-transactions.js';

export interface WorkerRegistrationOptions {
  readonly chain: ChainClient;
  readonly transactions: WorkerTransactions;
  /** The worker's address (its own principal). */
  readonly worker: string;
  /** Exact names of the models it serves. */
  readonly models: readonly string[];
  /** Stake to register with, and the level a slashed stake is topped up to. */
  readonly stakeWei: bigint;
  readonly logger: Logger;
}

export type RegistrationStep = 'registered' | 'models-updated' | 'stake-topped-up';

export interface RegistrationOutcome {
  /** What this start changed on chain; empty when the registration was already as configured. */
  readonly steps: readonly RegistrationStep[];
  readonly modelIds: readonly string[];
}

/** The worker left the registry (unbonding): it cannot serve again under this key. */
export class WorkerDeregisteredError extends Error {
  override readonly name = 'WorkerDeregisteredError';
}

/**
 * Brings the worker's registration to the configuration, idempotently: registers a new worker, and
 * on a restart re-uses the registration, replacing the model set only when it changed and topping up
 * a stake that fell below the configured one (a slash).
 */
export async function ensureWorkerRegistered(
  options: WorkerRegistrationOptions,
): Promise<RegistrationOutcome> {
  const { chain, transactions, worker, logger } = options;
  const modelIds = [...new Set(options.models.map(modelIdOf))];
  if (modelIds.length === 0) throw new RangeError('a worker must serve at least one model');
  const [stake, servedIds, unbondingEndsAt] = await Promise.all([
    chain.stakeOf(worker),
    chain.modelsOf(worker),
    chain.workerRegistry.unbondingEndsAt(worker),
  ]);
  if (unbondingEndsAt !== 0n) {
    throw new WorkerDeregisteredError(
      `worker ${worker} is deregistered (unbonding until ${unbondingEndsAt}); use a new key to serve again`,
    );
  }
  const steps: RegistrationStep[] = [];
  const seemsRegistered = stake > 0n || servedIds.length > 0;
  if (!seemsRegistered && (await registerOnce(transactions, modelIds, options.stakeWei))) {
    logger.info(
      { worker, stakeWei: options.stakeWei.toString(), models: options.models },
      'worker registered',
    );
    return { steps: ['registered'], modelIds };
  }
  if (!sameSet(servedIds, modelIds)) {
    await transactions.setModels(modelIds);
    steps.push('models-updated');
    logger.info({ worker, models: options.models }, 'worker models updated');
  }
  const current = await chain.stakeOf(worker);
  if (current < options.stakeWei) {
    await transactions.addStake(options.stakeWei - current);
    steps.push('stake-topped-up');
    logger.info({ worker, addedWei: (options.stakeWei - current).toString() }, 'worker stake topped up');
  }
  return { steps, modelIds };
}

/** False when the worker turned out registered already (slashed to zero with no models). */
async function registerOnce(
  transactions: WorkerTransactions,
  modelIds: readonly string[],
  stakeWei: bigint,
): Promise<boolean> {
  try {
    await transactions.register(modelIds, stakeWei);
    return true;
  } catch (error) {
    if (error instanceof ContractRevertError && error.revert.name === 'AlreadyRegistered') return false;
    throw error;
  }
}

function sameSet(left: readonly string[], right: readonly string[]): boolean {
  const normalized = new Set(left.map((id) => id.toLowerCase()));
  return left.length === right.length && right.every((id) => normalized.has(id.toLowerCase()));
}
