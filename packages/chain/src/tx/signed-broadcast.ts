import { Transaction, isError, type JsonRpcProvider, type TransactionRequest } from 'ethers';
import type { BlobSidecar } from '../blob/kzg.js';
import { kzg } from '../blob/kzg.js';
import type { TransactionFees } from './fees.js';
import type { SendingAccount, TransactionLane } from './operator-lanes.js';
import type { SentTransactionJournal, SentTransactionRecord } from './sent-transaction-journal.js';

/** Everything of a transaction except its nonce and fees, which the sender chooses. */
export interface TransactionBody {
  readonly to: string;
  readonly data: string;
  readonly value: bigint;
  readonly gasLimit: bigint;
  readonly blobs: readonly BlobSidecar[];
}

export interface SignedAttempt {
  readonly record: SentTransactionRecord;
  /** How the node took it. `nonce_too_low`: the chain moved past the nonce before it arrived. */
  readonly outcome: 'accepted' | 'nonce_too_low' | 'underpriced';
}

/**
 * Signs `body` at `nonce` with `fees`, records it in the journal, and only then broadcasts it, so a
 * crash between signing and sending leaves a record another replica can rebroadcast. Errors other
 * than the expected nonce and pricing refusals are thrown as they are.
 */
export async function signRecordBroadcast(
  context: { provider: JsonRpcProvider; journal: SentTransactionJournal; chainId: bigint },
  account: SendingAccount,
  nonce: number,
  body: TransactionBody,
  fees: TransactionFees,
  meta: { lane: TransactionLane; purpose: SentTransactionRecord['purpose']; replaces: string | null },
): Promise<SignedAttempt> {
  const request: TransactionRequest = {
    type: body.blobs.length > 0 ? 3 : 2,
    chainId: context.chainId,
    nonce,
    to: body.to,
    data: body.data,
    value: body.value,
    gasLimit: body.gasLimit,
    maxFeePerGas: fees.maxFeePerGas,
    maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
  };
  if (body.blobs.length > 0) {
    request.maxFeePerBlobGas = fees.maxFeePerBlobGas;
    request.blobs = body.blobs.map(({ data, commitment, proof }) => ({ data, commitment, proof }));
    request.kzg = kzg;
  }
  const rawTransaction = await account.signTransaction(request);
  const hash = Transaction.from(rawTransaction).hash;
  if (!hash) throw new Error('signed transaction has no hash');
  const record: SentTransactionRecord = {
    account: account.address,
    nonce,
    hash,
    rawTransaction,
    lane: meta.lane,
    purpose: meta.purpose,
    to: body.to,
    maxFeePerGas: fees.maxFeePerGas,
    maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    maxFeePerBlobGas: fees.maxFeePerBlobGas,
    replaces: meta.replaces,
    signedAtMs: Date.now(),
  };
  await context.journal.record(record);
  return { record, outcome: await broadcast(context.provider, rawTransaction) };
}

/** Sends a signed transaction; an identical one the node already holds counts as accepted. */
export async function broadcast(
  provider: JsonRpcProvider,
  rawTransaction: string,
): Promise<SignedAttempt['outcome']> {
  try {
    await provider.send('eth_sendRawTransaction', [rawTransaction]);
    return 'accepted';
  } catch (error) {
    if (isError(error, 'NONCE_EXPIRED')) return 'nonce_too_low';
    if (isError(error, 'REPLACEMENT_UNDERPRICED')) return 'underpriced';
    const message = rpcMessage(error);
    if (/already known|known transaction|already imported/i.test(message)) return 'accepted';
    if (/nonce too low|nonce has already been used/i.test(message)) return 'nonce_too_low';
    if (/underpriced/i.test(message)) return 'underpriced';
    throw error;
  }
}

/** The node's own message, wherever ethers put it (error codes differ between nodes). */
function rpcMessage(error: unknown): string {
  const record = error as {
    info?: { error?: { message?: unknown } };
    error?: { message?: unknown };
    message?: unknown;
  };
  return String(record?.info?.error?.message ?? record?.error?.message ?? record?.message ?? '');
}
