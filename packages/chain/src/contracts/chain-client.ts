import type { JsonRpcProvider } from 'ethers';
import { Network, type Provider } from 'ethers';
import {
  connectJobRegistry,
  connectWorkerRegistry,
  fromParametersStruct,
  withDecodedRevert,
  type JobRegistry,
  type ProtocolParameters,
  type WorkerRegistry,
} from '@svc/contracts';
import { RpcProvider } from './rpc-provider.js';
import {
  readCommitBatch,
  readCommitment,
  readPromptPlace,
  type Commitment,
  type PromptPlace,
} from './job-logs.js';
import { toJob, toSession, type Job, type Session } from './records.js';

export interface ChainClientOptions {
  /** A provider; give it `cacheTimeout: -1` so reads after a write never see a cached answer. */
  readonly provider: Provider;
  readonly jobRegistryAddress: string;
  readonly workerRegistryAddress: string;
}

/**
 * Typed reads of JobRegistry and WorkerRegistry for the services. Every revert surfaces as the
 * contracts package's ContractRevertError (name and args); nothing is swallowed.
 */
export class ChainClient {
  /** Typed contracts over the provider, for `populateTransaction` of writes sent by a TransactionSender. */
  readonly jobRegistry: JobRegistry;
  readonly workerRegistry: WorkerRegistry;
  readonly provider: Provider;
  #parameters: Promise<ProtocolParameters> | undefined;

  constructor(options: ChainClientOptions) {
    this.provider = options.provider;
    this.jobRegistry = connectJobRegistry(options.jobRegistryAddress, options.provider);
    this.workerRegistry = connectWorkerRegistry(options.workerRegistryAddress, options.provider);
  }

  get addresses(): { jobRegistry: string; workerRegistry: string } {
    return {
      jobRegistry: this.jobRegistry.target as string,
      workerRegistry: this.workerRegistry.target as string,
    };
  }

  /**
   * Owner-set parameters, read once and cached. A follower of `ParametersSet` events calls
   * {@link refreshParameters} so a change on chain reaches every reader.
   */
  parameters(): Promise<ProtocolParameters> {
    if (!this.#parameters) {
      const reading = read(() => this.jobRegistry.parameters()).then(fromParametersStruct);
      // A failed read is not cached: the next caller tries again.
      reading.catch(() => {
        if (this.#parameters === reading) this.#parameters = undefined;
      });
      this.#parameters = reading;
    }
    return this.#parameters;
  }

  refreshParameters(): Promise<ProtocolParameters> {
    this.#parameters = undefined;
    return this.parameters();
  }

  /** The job fee of a model in wei; 0 when the model is disabled or unknown. */
  jobFee(modelId: string): Promise<bigint> {
    return read(() => this.jobRegistry.jobFee(modelId));
  }

  async getSession(sessionId: bigint): Promise<Session> {
    return toSession(sessionId, await read(() => this.jobRegistry.getSession(sessionId)));
  }

  async getJob(jobId: bigint): Promise<Job> {
    return toJob(jobId, await read(() => this.jobRegistry.getJob(jobId)));
  }

  /**
   * Where a Submitted job's prompt lies, from its latest `JobSubmitted` or `JobReassigned` (see
   * `readPromptPlace`), searched from `fromBlock` when the announcing block is known.
   */
  async promptPlaceOf(job: Job, fromBlock?: number): Promise<PromptPlace | undefined> {
    const bound =
      fromBlock !== undefined
        ? { fromBlock }
        : { jobTimeoutSeconds: (await this.parameters()).jobTimeoutSeconds };
    return readPromptPlace(this.jobRegistry, this.provider, job, bound);
  }

  /** What the job's worker committed, once this node has its `JobCompleted` (see `readCommitment`). */
  commitmentOf(job: Job): Promise<Commitment | undefined> {
    return readCommitment(this.jobRegistry, this.provider, job);
  }

  /** Every answer hash of the job's commit batch, in order: what a dispute hands the contract. */
  commitBatchOf(job: Job, commitment: Commitment): Promise<string[]> {
    return readCommitBatch(this.jobRegistry, this.provider, job, commitment);
  }

  prepaidBalanceOf(user: string): Promise<bigint> {
    return read(() => this.jobRegistry.prepaidBalanceOf(user));
  }

  isDelegateAuthorized(user: string, delegate: string): Promise<boolean> {
    return read(() => this.jobRegistry.isDelegateAuthorized(user, delegate));
  }

  delegateAllowance(user: string, delegate: string): Promise<bigint> {
    return read(() => this.jobRegistry.delegateAllowance(user, delegate));
  }

  /** Balance, authorization and allowance of `user` towards `delegate`, read in parallel. */
  async delegatePosition(
    user: string,
    delegate: string,
  ): Promise<{ balance: bigint; authorized: boolean; allowance: bigint }> {
    const [balance, authorized, allowance] = await Promise.all([
      this.prepaidBalanceOf(user),
      this.isDelegateAuthorized(user, delegate),
      this.delegateAllowance(user, delegate),
    ]);
    return { balance, authorized, allowance };
  }

  isNonceUsed(payer: string, nonce: string): Promise<boolean> {
    return read(() => this.jobRegistry.isNonceUsed(payer, nonce));
  }

  /** The account an operator acts for, or the account itself. */
  principalOf(account: string): Promise<string> {
    return read(() => this.jobRegistry.principalOf(account));
  }

  isPaused(): Promise<boolean> {
    return read(() => this.jobRegistry.paused());
  }

  domainSeparator(): Promise<string> {
    return read(() => this.jobRegistry.domainSeparator());
  }

  earningsOf(worker: string): Promise<bigint> {
    return read(() => this.jobRegistry.earningsOf(worker));
  }

  isWorkerActive(worker: string): Promise<boolean> {
    return read(() => this.workerRegistry.isActive(worker));
  }

  workerServes(worker: string, modelId: string): Promise<boolean> {
    return read(() => this.workerRegistry.serves(worker, modelId));
  }

  stakeOf(worker: string): Promise<bigint> {
    return read(() => this.workerRegistry.stakeOf(worker));
  }

  async modelsOf(worker: string): Promise<string[]> {
    return [...(await read(() => this.workerRegistry.modelsOf(worker)))];
  }
}

function read<T>(call: () => Promise<T>): Promise<T> {
  return withDecodedRevert(call);
}

/** Where a service reaches the chain: the shape of the runner's chain connection. */
export interface ChainEndpoint {
  readonly rpcUrl: string;
  readonly chainId: number;
  readonly contracts: { readonly jobRegistry: string; readonly workerRegistry: string };
}

/**
 * A service's own provider and the ChainClient over it. The provider has no call cache, so a read right
 * after a write (a nonce, a reassignment) sees it; destroy it when the service stops.
 */
export function connectChain(endpoint: ChainEndpoint): { provider: JsonRpcProvider; client: ChainClient } {
  const network = Network.from(endpoint.chainId);
  const provider = new RpcProvider(endpoint.rpcUrl, network, {
    staticNetwork: network,
    cacheTimeout: -1,
    batchStallTime: 0,
  });
  const client = new ChainClient({
    provider,
    jobRegistryAddress: endpoint.contracts.jobRegistry,
    workerRegistryAddress: endpoint.contracts.workerRegistry,
  });
  return { provider, client };
}
