import { hexlify } from 'ethers';
import type { ChainClient, MinedTransaction, TransactionSender } from '@svc/chain';
import { jobRegistryInterface, workerRegistryInterface } from '@svc/contracts';

/**
 * Every write the worker makes, through one TransactionSender: one nonce allocator for the worker's
 * account, each call simulated first (a revert is a ContractRevertError and costs nothing).
 */
export class WorkerTransactions {
  readonly #sender: TransactionSender;
  readonly #chain: ChainClient;

  constructor(sender: TransactionSender, chain: ChainClient) {
    this.#sender = sender;
    this.#chain = chain;
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

  completeJob(jobId: bigint, responseHash: string): Promise<MinedTransaction> {
    return this.#toJobRegistry('completeJob', [jobId, responseHash]);
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
