import { describe, expect, it } from '@jest/globals';
import {
  ContractRevertError,
  TransactionRevertedError,
  type ChainClient,
  type TransactionSender,
} from '@svc/chain';
import { jobRegistryInterface } from '@svc/contracts';
import type { Log, TransactionReceipt } from 'ethers';
import { WorkerTransactions } from '../../src/chain/worker-transactions.js';

const REGISTRY = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const WORKER = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';
const HASH = `0x${'ab'.repeat(32)}`;
const [ANSWERED, ALREADY_COMPLETED, PAST_DEADLINE] = [0x100000001n, 0x200000001n, 0x300000001n];

/** A log of JobRegistry, as the node returns it in a receipt. */
function logOf(event: string, args: unknown[]): Log {
  const { data, topics } = jobRegistryInterface.encodeEventLog(event, args);
  return { address: REGISTRY, data, topics } as unknown as Log;
}

/**
 * A chain on which PAST_DEADLINE's commitment fails its simulation, and a sender whose mined batch
 * completes ANSWERED and reports ALREADY_COMPLETED's call as reverted (JobStateInvalid).
 */
function fakes() {
  const sent: string[][] = [];
  const chain = {
    addresses: { jobRegistry: REGISTRY, workerRegistry: WORKER },
    provider: {
      call: async ({ data }: { data: string }) => {
        const [jobId] = jobRegistryInterface.decodeFunctionData('completeJob', data);
        if (jobId === PAST_DEADLINE) {
          throw Object.assign(new Error('execution reverted'), {
            data: jobRegistryInterface.encodeErrorResult('JobDeadlinePassed', [PAST_DEADLINE, 5n]),
          });
        }
        return '0x';
      },
    },
  } as unknown as ChainClient;
  const sender = {
    send: async ({ data }: { data: string }) => {
      const [calls] = jobRegistryInterface.decodeFunctionData('batch', data);
      const jobIds = (calls as string[]).map(
        (call) => jobRegistryInterface.decodeFunctionData('completeJob', call)[0],
      );
      sent.push(jobIds.map(String));
      const failedAt = jobIds.indexOf(ALREADY_COMPLETED);
      const logs = [
        logOf('JobCompleted', [ANSWERED, WORKER, HASH]),
        logOf('BatchCallFailed', [
          failedAt,
          jobRegistryInterface.encodeErrorResult('JobStateInvalid', [ALREADY_COMPLETED, 2]),
        ]),
      ];
      const receipt = { hash: '0xfeed', blockNumber: 7, logs } as unknown as TransactionReceipt;
      return { receipt, account: WORKER, nonce: 3, replacedHashes: [] };
    },
  } as unknown as TransactionSender;
  return { sent, transactions: new WorkerTransactions(sender, chain, WORKER) };
}

describe('WorkerTransactions, commitments in batches', () => {
  it('commits together what was made together, each answer failing alone, and the same answer once', async () => {
    const { sent, transactions } = fakes();
    const outcomes = await Promise.allSettled([
      transactions.completeJob(ANSWERED, HASH),
      transactions.completeJob(ALREADY_COMPLETED, HASH),
      transactions.completeJob(PAST_DEADLINE, HASH),
      transactions.completeJob(ANSWERED, HASH),
    ]);
    // One transaction: the answer refused in simulation left out, the repeated one sent once.
    expect(sent).toEqual([[String(ANSWERED), String(ALREADY_COMPLETED)]]);
    expect(outcomes[0]).toMatchObject({ status: 'fulfilled', value: { receipt: { hash: '0xfeed' } } });
    expect(outcomes[3]).toMatchObject({ status: 'fulfilled', value: { receipt: { hash: '0xfeed' } } });
    const reverted = (outcomes[1] as PromiseRejectedResult).reason as TransactionRevertedError;
    expect(reverted).toBeInstanceOf(TransactionRevertedError);
    expect(reverted.revert).toMatchObject({ name: 'JobStateInvalid', args: { jobId: ALREADY_COMPLETED } });
    const refused = (outcomes[2] as PromiseRejectedResult).reason as ContractRevertError;
    expect(refused).toBeInstanceOf(ContractRevertError);
    expect(refused.revert.name).toBe('JobDeadlinePassed');
  });
});
