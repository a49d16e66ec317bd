import type { JsonRpcProvider, Wallet } from 'ethers';
import {
  ChainClient,
  InMemorySentTransactionJournal,
  OperatorLanes,
  TransactionSender,
  type SentTransactionJournal,
} from '@svc/chain';
import { MemoryStore } from '@svc/platform';
import { WorkerTransactions } from './worker-transactions.js';

export interface WorkerChainOptions {
  readonly provider: JsonRpcProvider;
  /** The worker's key; connected to the provider here. */
  readonly wallet: Wallet;
  readonly jobRegistryAddress: string;
  readonly workerRegistryAddress: string;
  /** How often pending transactions are looked at; a quarter of the block time suits. */
  readonly pollIntervalMs?: number;
  readonly journal?: SentTransactionJournal;
}

export interface WorkerChain {
  readonly chain: ChainClient;
  readonly transactions: WorkerTransactions;
  readonly address: string;
  readonly wallet: Wallet;
  close(): Promise<void>;
}

/**
 * The worker's view of the chain: typed reads, and writes from its one account through one sender.
 * The worker is the only user of its account, so nonces live in this process.
 */
export function connectWorkerChain(options: WorkerChainOptions): WorkerChain {
  const wallet = options.wallet.connect(options.provider);
  const chain = new ChainClient({
    provider: options.provider,
    jobRegistryAddress: options.jobRegistryAddress,
    workerRegistryAddress: options.workerRegistryAddress,
  });
  const nonceStore = new MemoryStore();
  const sender = new TransactionSender({
    provider: options.provider,
    nonces: nonceStore.nonces,
    journal: options.journal ?? new InMemorySentTransactionJournal(),
    // The worker sends no blobs; every call shares the plain lane of its one account.
    lanes: new OperatorLanes({ blob: [], plain: [wallet], maxInFlightPerPlainAccount: 16 }),
    maxFeePerBlobGas: 0n,
    pollIntervalMs: options.pollIntervalMs ?? 1_000,
  });
  return {
    chain,
    transactions: new WorkerTransactions(sender, chain, wallet.address),
    address: wallet.address,
    wallet,
    close: () => nonceStore.close(),
  };
}
