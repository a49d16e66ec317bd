import { createECDH, randomBytes } from 'node:crypto';
import {
  hexlify,
  parseEther,
  type ContractTransactionReceipt,
  type ContractTransactionResponse,
  type Log,
  type Result,
  type TransactionReceipt,
} from 'ethers';
import { sendWithBlobs } from '@svc/anvil';
import { jobRegistryInterface, workerRegistryInterface } from '../../src/connect.js';
import type { DeployConfig } from '../../src/deploy.js';
import { modelIdOf } from '../../src/modelId.js';
import type { Actor, Chain } from './chain.js';

/** An Ollama-style name (with a colon) and a plain one. */
export const MODEL = { name: 'llama3.2:1b', feeWei: parseEther('0.001') };
export const OTHER_MODEL = { name: 'qwen2.5-coder', feeWei: parseEther('0.002') };
export const MODEL_ID = modelIdOf(MODEL.name);
export const OTHER_MODEL_ID = modelIdOf(OTHER_MODEL.name);
export const STAKE = parseEther('0.1');
export const DEPOSIT = parseEther('1');

export const DEPLOY_CONFIG: DeployConfig = { models: [MODEL, OTHER_MODEL] };

/** A fresh uncompressed P-256 public key (65 bytes, 0x04 prefix), as a worker makes per session. */
export function sessionPublicKey(): string {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return hexlify(ecdh.getPublicKey());
}

export function randomNonce(): string {
  return hexlify(randomBytes(32));
}

type Receipt = TransactionReceipt | ContractTransactionReceipt;

/** Every log of either contract in `receipt` named `event`, decoded. */
export function eventsOf(receipt: Receipt | null, event: string) {
  const logs: readonly Log[] = receipt?.logs ?? [];
  return logs.flatMap((log) => {
    for (const contractInterface of [jobRegistryInterface, workerRegistryInterface]) {
      const parsed = contractInterface.parseLog(log);
      if (parsed?.name === event) return [parsed.args];
    }
    return [];
  });
}

export function eventOf(receipt: Receipt | null, event: string) {
  const [first, ...rest] = eventsOf(receipt, event);
  if (!first || rest.length > 0) throw new Error(`expected exactly one ${event} event`);
  return first;
}

export async function mined(sent: Promise<ContractTransactionResponse>): Promise<ContractTransactionReceipt> {
  const receipt = await (await sent).wait();
  if (!receipt) throw new Error('transaction not mined');
  return receipt;
}

/** A struct returned by a view (an ethers Result) as a plain object, for whole-struct assertions. */
export function plain(struct: object): Record<string, unknown> {
  return (struct as Result).toObject();
}

/**
 * Calls JobRegistry `method` as `actor` with `blobCount` blobs attached (the prompt rule). A submission
 * given without its job id (`submitJobFor(payer, sessionId, maxFee)`, `submitJobWithDebit(sessionId,
 * auth, signature)`) names the session's `nextJobId`, read now. The prompt is payload `promptIndex`
 * of blob `blobIndex` (the last two arguments of each of these calls).
 */
export async function callWithBlobs(
  chain: Chain,
  actor: Actor,
  method: 'submitJobFor' | 'submitJobWithDebit' | 'reassignJob',
  args: readonly unknown[],
  blobCount = 1,
  { blobIndex = 0, promptIndex = 0 } = {},
) {
  if (method !== 'reassignJob' && args.length === 3) {
    const at = method === 'submitJobFor' ? 1 : 0;
    const jobId = await chain.jobs('stranger').nextJobId(args[at] as bigint);
    args = [...args.slice(0, at + 1), jobId, ...args.slice(at + 1)];
  }
  args = [...args, blobIndex, promptIndex];
  const data = jobRegistryInterface.encodeFunctionData(method, args);
  const response = await sendWithBlobs(
    chain.signers[actor],
    { to: chain.deployment.jobRegistryAddress, data },
    blobCount,
  );
  const receipt = await response.wait();
  if (!receipt) throw new Error('transaction not mined');
  return { receipt, versionedHashes: response.blobVersionedHashes ?? [] };
}

export async function registerWorker(
  chain: Chain,
  actor: Actor,
  models: readonly string[] = [MODEL_ID, OTHER_MODEL_ID],
  stake = STAKE,
) {
  return mined(chain.workers(actor).register([...models], { value: stake }));
}

export async function openSession(
  chain: Chain,
  options: { by?: Actor; owner?: Actor; worker?: Actor; modelId?: string } = {},
): Promise<bigint> {
  const owner = chain.address[options.owner ?? 'user'];
  const worker = chain.address[options.worker ?? 'worker'];
  const receipt = await mined(
    chain.jobs(options.by ?? options.owner ?? 'user').openSession(owner, options.modelId ?? MODEL_ID, worker),
  );
  return eventOf(receipt, 'SessionOpened').sessionId as bigint;
}

export async function openActiveSession(
  chain: Chain,
  options: { by?: Actor; owner?: Actor; worker?: Actor; modelId?: string } = {},
): Promise<bigint> {
  const sessionId = await openSession(chain, options);
  await mined(chain.jobs(options.worker ?? 'worker').claimSession(sessionId, sessionPublicKey()));
  return sessionId;
}

/** Submits a job with one blob; returns its id and the blob's versioned hash. */
export async function submitJob(
  chain: Chain,
  sessionId: bigint,
  options: {
    by?: Actor;
    payer?: Actor;
    maxFee?: bigint;
    blobs?: number;
    blobIndex?: number;
    promptIndex?: number;
  } = {},
) {
  const payer = chain.address[options.payer ?? 'user'];
  const { receipt, versionedHashes } = await callWithBlobs(
    chain,
    options.by ?? options.payer ?? 'user',
    'submitJobFor',
    [payer, sessionId, options.maxFee ?? MODEL.feeWei],
    options.blobs ?? 1,
    options,
  );
  const submitted = eventOf(receipt, 'JobSubmitted');
  return { jobId: submitted.jobId as bigint, receipt, versionedHashes };
}

/** How long a withdrawal request or an allowance cut takes to bind (JobRegistry.SPEND_CUT_DELAY). */
export const SPEND_CUT_DELAY = 600;

/** Requests a withdrawal, waits out the delay and pays it out; returns the payout's receipt. */
export async function withdrawNow(chain: Chain, actor: Actor, amount: bigint) {
  await mined(chain.jobs(actor).requestWithdrawal(amount));
  await chain.clock.advance(SPEND_CUT_DELAY);
  return mined(chain.jobs(actor).withdrawBalance(amount));
}

/** The user funds its balance and lets the service spend it. */
export async function fundUserForService(chain: Chain, user: Actor = 'user', amount = DEPOSIT) {
  return mined(chain.jobs(user).depositAndAuthorize(chain.address.service, { value: amount }));
}
