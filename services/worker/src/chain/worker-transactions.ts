import { hexlify } from 'ethers';
import {
  CallBatcher,
  TransactionRevertedError,
  decodeProtocolLog,
  type BatchEntry,
  type BatchPolicy,
  type ChainClient,
  type MinedTransaction,
  type TransactionSender,
} from '@svc/chain';
import {
  decodeRevertData,
  jobRegistryInterface,
  withDecodedRevert,
  workerRegistryInterface,
} from '@svc/contracts';

/**
 * Commitments share a transaction (`batch`, docs/protocol.md, Batches) and its commit batch's root: a batch
 * stays open two seconds for the answers made meanwhile, and the ones made while a batch is being mined go
 * together in the next, so a worker pays about one transaction and one new slot every two seconds (or
 * block) for all its answers. No caller waits for it (a call ends on the signed final; only its charge,
 * `ANSWERED`, waits for the commitment), and a job gives its slot to the next one once answered. A
 * commitment waits at most `maxWaitMs` (well within COMMIT_MARGIN) for its batch to close.
 */
export const COMMIT_BATCHES: BatchPolicy = { lingerMs: 2_000, maxWaitMs: 2_000, maxCalls: 64 };

interface Commitment {
  readonly jobId: bigint;
  readonly responseHash: string;
}

/**
 * Every write the worker makes, through one TransactionSender: one nonce allocator for the worker's
 * account, each call simulated first (a revert is a ContractRevertError and costs nothing).
 */
export class WorkerTransactions {
  readonly #sender: TransactionSender;
  readonly #chain: ChainClient;
  /** The worker's principal, whose commitments these are. */
  readonly #worker: string;
  readonly #commitments: CallBatcher<Commitment, MinedTransaction>;

  constructor(sender: TransactionSender, chain: ChainClient, worker: string, commitBatches = COMMIT_BATCHES) {
    this.#sender = sender;
    this.#chain = chain;
    this.#worker = worker;
    this.#commitments = new CallBatcher(
      commitBatches,
      () => 1,
      Number.MAX_SAFE_INTEGER,
      (entries) => this.#commitBatch(entries),
    );
  }

  register(modelIds: readonly string[], stakeWei: bigint): Promise<MinedTransaction> {
    return this.#toWorkerRegistry('register', [modelIds], stakeWei);
  }

  setModels(modelIds: readonly string[]): Promise<MinedTransaction> {
    return this.#toWorkerRegistry('setModels', [modelIds]);
  }

  addStake(amountWei: bigint): Promise<MinedTransaction> {
    return this.#toWorkerRegistry('addStake', [], amountWei);
  }

  claimSession(sessionId: bigint, sessionPublicKey: Uint8Array): Promise<MinedTransaction> {
    return this.#toJobRegistry('claimSession', [sessionId, hexlify(sessionPublicKey)]);
  }

  closeSession(sessionId: bigint): Promise<MinedTransaction> {
    return this.#toJobRegistry('closeSession', [sessionId]);
  }

  /**
   * Commits an answer, in a batch with the others made meanwhile. One that would revert is refused alone
   * before anything is sent (ContractRevertError); one whose call reverts in the mined batch is a
   * TransactionRevertedError naming the contract's error, as for a transaction of its own.
   */
  completeJob(jobId: bigint, responseHash: string): Promise<MinedTransaction> {
    return this.#commitments.add({ jobId, responseHash });
  }

  failJob(jobId: bigint): Promise<MinedTransaction> {
    return this.#toJobRegistry('failJob', [jobId]);
  }

  releaseJobs(jobIds: readonly bigint[]): Promise<MinedTransaction> {
    return this.#toJobRegistry('releaseJobs', [jobIds]);
  }

  withdrawEarnings(): Promise<MinedTransaction> {
    return this.#toJobRegistry('withdrawEarnings', []);
  }

  async #commitBatch(batch: BatchEntry<Commitment, MinedTransaction>[]): Promise<void> {
    // The same answer committed twice while a batch formed (its saved final recovered as the chain
    // announced the job) goes once; the second call would only revert.
    const byJob = new Map<bigint, BatchEntry<Commitment, MinedTransaction>>();
    for (const entry of batch) {
      const first = byJob.get(entry.request.jobId);
      byJob.set(
        entry.request.jobId,
        first
          ? {
              request: first.request,
              resolve: (mined) => (first.resolve(mined), entry.resolve(mined)),
              reject: (error) => (first.reject(error), entry.reject(error)),
            }
          : entry,
      );
    }
    const entries = [...byJob.values()];
    const registry = this.#chain.addresses.jobRegistry;
    const calls = entries.map(({ request }) =>
      jobRegistryInterface.encodeFunctionData('completeJob', [request.jobId, request.responseHash]),
    );
    const simulated = await Promise.allSettled(
      calls.map((data) =>
        withDecodedRevert(() => this.#chain.provider.call({ from: this.#worker, to: registry, data })),
      ),
    );
    const kept = entries.flatMap((entry, index) => {
      const outcome = simulated[index]!;
      if (outcome.status === 'fulfilled') return [{ entry, data: calls[index]! }];
      entry.reject(outcome.reason);
      return [];
    });
    if (kept.length === 0) return;
    let mined: MinedTransaction;
    try {
      mined = await this.#toJobRegistry('batch', [kept.map(({ data }) => data)]);
    } catch (error) {
      for (const { entry } of kept) entry.reject(error);
      return;
    }
    const { receipt, account, nonce } = mined;
    const events = receipt.logs.map((log) => decodeProtocolLog(log, this.#chain.addresses));
    kept.forEach(({ entry }, index) => {
      const completed = events.some(
        (event) => event?.name === 'JobCompleted' && event.args.jobId === entry.request.jobId,
      );
      if (completed) return entry.resolve(mined);
      const failed = events.find(
        (event) => event?.name === 'BatchCallFailed' && event.args.index === BigInt(index),
      );
      const revert = failed?.name === 'BatchCallFailed' ? decodeRevertData(failed.args.reason) : undefined;
      entry.reject(
        new TransactionRevertedError(account, nonce, receipt.hash, receipt.blockNumber, revert ?? null),
      );
    });
  }

  #toJobRegistry(method: string, args: readonly unknown[]): Promise<MinedTransaction> {
    return this.#sender.send({
      to: this.#chain.addresses.jobRegistry,
      data: jobRegistryInterface.encodeFunctionData(method, args),
    });
  }

  #toWorkerRegistry(method: string, args: readonly unknown[], value?: bigint): Promise<MinedTransaction> {
    return this.#sender.send({
      to: this.#chain.addresses.workerRegistry,
      data: workerRegistryInterface.encodeFunctionData(method, args),
      ...(value === undefined ? {} : { value }),
    });
  }
}
