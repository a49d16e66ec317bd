import { ZeroHash, concat, keccak256, type Log, type Provider } from 'ethers';
import { withDecodedRevert, type JobRegistry } from '@svc/contracts';
import type { Job } from './records.js';

/** Most blocks per `eth_getLogs` while looking for a commitment (RPC providers cap the range). */
const LOOKUP_WINDOW_BLOCKS = 2_000;

/**
 * What a job's worker committed (docs/protocol.md, Commit batches). JobRegistry keeps one root per commit
 * batch; each answer's hash is in its `JobCompleted` event, the batch's answers in the order of the events of
 * the transaction that committed them.
 */
export interface Commitment {
  readonly responseHash: string;
  readonly transactionHash: string;
  readonly blockNumber: number;
}

/**
 * The commitment of a completed job (one with `completedAt`), from its `JobCompleted` event. Undefined
 * while this node has no such event (not completed, or not yet indexed). Looks back from the latest block a
 * window at a time, down to the completion's time, so a recent commitment costs one `eth_getLogs`.
 */
export async function readCommitment(
  registry: JobRegistry,
  provider: Provider,
  job: Job,
): Promise<Commitment | undefined> {
  if (job.completedAt === 0) return undefined;
  const log = await findCompletedLog(registry, provider, job);
  if (!log) return undefined;
  return {
    responseHash: registry.interface.parseLog(log)!.args.responseHash as string,
    transactionHash: log.transactionHash,
    blockNumber: log.blockNumber,
  };
}

/**
 * Every answer hash of the job's commit batch, in order (what `disputeMismatch` takes): the `JobCompleted`
 * events of the commitment's transaction from `commitIndex` places before the job's, as many as make the
 * batch's root on chain.
 */
export async function readCommitBatch(
  registry: JobRegistry,
  provider: Provider,
  job: Job,
  commitment: Commitment,
): Promise<string[]> {
  const receipt = await provider.getTransactionReceipt(commitment.transactionHash);
  if (!receipt)
    throw new Error(`job ${job.jobId}: no receipt for its commitment ${commitment.transactionHash}`);
  const topic = registry.interface.getEvent('JobCompleted').topicHash;
  const address = (registry.target as string).toLowerCase();
  const answers = receipt.logs
    .filter((entry) => entry.address.toLowerCase() === address && entry.topics[0] === topic)
    .map((entry) => registry.interface.parseLog(entry)!.args);
  const position = answers.findIndex((args) => args.jobId === job.jobId);
  const start = position - job.commitIndex;
  if (position < 0 || start < 0)
    throw new Error(`job ${job.jobId}: its JobCompleted is not in ${commitment.transactionHash}`);
  const root = await withDecodedRevert(() => registry.commitRoot(job.commitBatch));
  const hashes = answers.slice(start).map((args) => args.responseHash as string);
  for (let size = job.commitIndex + 1; size <= hashes.length; size++) {
    const batch = hashes.slice(0, size);
    if (commitRootOf(batch) === root) return batch;
  }
  throw new Error(
    `job ${job.jobId}: the answers of transaction ${commitment.transactionHash} do not make its batch's root`,
  );
}

/**
 * The root JobRegistry keeps for a commit batch of these answer hashes, in order: `keccak256(root ‖ hash)`
 * for each, from 32 zero bytes (docs/protocol.md, Commit batches).
 */
export function commitRootOf(responseHashes: readonly string[]): string {
  return responseHashes.reduce((root, hash) => keccak256(concat([root, hash])), ZeroHash);
}

async function findCompletedLog(
  registry: JobRegistry,
  provider: Provider,
  job: Job,
): Promise<Log | undefined> {
  let to = await provider.getBlockNumber();
  for (;;) {
    const from = Math.max(0, to - LOOKUP_WINDOW_BLOCKS + 1);
    const logs = await registry.queryFilter(registry.filters.JobCompleted(job.jobId), from, to);
    // A job is completed once: a second event would be another chain's.
    if (logs.length > 0) return logs.at(-1);
    if (from === 0) return undefined;
    const first = await provider.getBlock(from);
    // A completion at `completedAt` after this window's first block would have been in it.
    if (!first || first.timestamp < job.completedAt) return undefined;
    to = from - 1;
  }
}
