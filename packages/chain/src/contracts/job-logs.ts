import { ZeroHash, concat, keccak256, toBeHex, type Log, type Provider } from 'ethers';
import { withDecodedRevert, type JobRegistry } from '@svc/contracts';
import type { Job } from './records.js';

// What JobRegistry keeps in a job's events rather than in storage (docs/architecture.md, Gas): the blob
// holding its prompt (`JobSubmitted`, `JobReassigned`) and the hash of its answer (`JobCompleted`).

/** Most blocks per `eth_getLogs` while looking for a job's event (RPC providers cap the range). */
const LOOKUP_WINDOW_BLOCKS = 2_000;

/** Where the prompt of a job's current attempt lies: the blob's versioned hash, and its block. */
export interface PromptPlace {
  readonly promptBlobHash: string;
  readonly promptIndex: number;
  /** The block of the submission or reassignment that carried the blob. */
  readonly blockNumber: number;
}

/**
 * The prompt place of a Submitted job's current attempt, from its latest `JobSubmitted` (attempt 1) or
 * `JobReassigned` (later attempts, into the job's session), looked for back from the latest block: down to
 * `fromBlock` when the announcing block is known, else to the time the job's deadline was set from
 * (`deadline - jobTimeoutSeconds`). Undefined while this node has no event matching the job as `getJob`
 * reads it.
 */
export async function readPromptPlace(
  registry: JobRegistry,
  provider: Provider,
  job: Job,
  bound: { readonly fromBlock: number } | { readonly jobTimeoutSeconds: number },
): Promise<PromptPlace | undefined> {
  const submitted = registry.interface.getEvent('JobSubmitted');
  const reassigned = registry.interface.getEvent('JobReassigned');
  const log = await findJobLog(
    provider,
    registry,
    [submitted.topicHash, reassigned.topicHash],
    job.jobId,
    'fromBlock' in bound ? bound : { since: job.deadline - bound.jobTimeoutSeconds },
  );
  if (!log) return undefined;
  const event = registry.interface.parseLog(log)!;
  const current =
    job.attempt === 1
      ? event.name === 'JobSubmitted'
      : event.name === 'JobReassigned' && event.args.newSessionId === job.sessionId;
  if (!current || Number(event.args.promptIndex) !== job.promptIndex) return undefined;
  return {
    promptBlobHash: event.args.promptBlobHash as string,
    promptIndex: job.promptIndex,
    blockNumber: log.blockNumber,
  };
}

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
  const topic = registry.interface.getEvent('JobCompleted').topicHash;
  const log = await findJobLog(provider, registry, [topic], job.jobId, { since: job.completedAt });
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

/**
 * The latest log of one of `topics` about `jobId` (its first indexed argument), looked for back from the
 * latest block a window at a time: down to `fromBlock`, or to the window whose first block is older than
 * `since` (a unix time the event is known to carry), or to genesis.
 */
async function findJobLog(
  provider: Provider,
  registry: JobRegistry,
  topics: readonly string[],
  jobId: bigint,
  bound: { readonly fromBlock?: number; readonly since?: number },
): Promise<Log | undefined> {
  const floor = bound.fromBlock ?? 0;
  let to = await provider.getBlockNumber();
  while (to >= floor) {
    const from = Math.max(floor, to - LOOKUP_WINDOW_BLOCKS + 1);
    const logs = await provider.getLogs({
      address: registry.target as string,
      topics: [[...topics], toBeHex(jobId, 32)],
      fromBlock: from,
      toBlock: to,
    });
    if (logs.length > 0) return logs.at(-1);
    if (bound.since !== undefined) {
      const first = await provider.getBlock(from);
      // An event at `since` after this window's first block would have been in it.
      if (!first || first.timestamp < bound.since) return undefined;
    }
    to = from - 1;
  }
  return undefined;
}
