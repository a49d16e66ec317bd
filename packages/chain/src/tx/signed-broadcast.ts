import {
  SigningKey,
  Transaction,
  isError,
  type BaseWallet,
  type JsonRpcProvider,
  type TransactionLike,
  type TransactionRequest,
} from 'ethers';
import type { BlobSidecar } from '../blob/kzg.js';
import type { ProvingBlobSidecar } from '../blob/kzg-thread.js';
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
  /** A blob's proof may still be computing when the body is built (it is awaited after signing). */
  readonly blobs: readonly (BlobSidecar | ProvingBlobSidecar)[];
}

export interface SignedAttempt {
  readonly record: SentTransactionRecord;
  /** The signed transaction without its blob sidecar (the form its hash and signature cover). */
  readonly signedTransaction: string;
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
  /**
   * Told once the attempt is signed, before its blobs' proofs are awaited and before it is recorded and
   * broadcast: the fast path hands it to its worker then (the signature covers only the blobs' hashes).
   */
  onSigned?: (signed: { hash: string; signedTransaction: string }) => void,
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
  if (body.blobs.length > 0) request.maxFeePerBlobGas = fees.maxFeePerBlobGas;
  const signed = await signTransaction(account, request, body.blobs);
  onSigned?.({ hash: signed.hash, signedTransaction: signed.signedTransaction });
  const { hash, signedTransaction } = signed;
  const rawTransaction = await signed.rawTransaction;
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
  return { record, signedTransaction, outcome: await broadcast(context.provider, rawTransaction) };
}

/**
 * Signs a transaction: its hash and signed form at once, its network form (`rawTransaction`) once its
 * blobs' proofs are ready. A blob transaction signed by a local key takes the cheap path: the signature
 * covers only the blobs' versioned hashes, so the transaction is signed and hashed without its sidecar
 * (before the proofs exist), and the sidecar is appended as bytes. ethers' own path hex-encodes and
 * RLP-encodes the 128 KiB blob as strings, then the result has to be parsed again for its hash: about
 * 70 ms a blob here, against about 2 ms.
 */
export async function signTransaction(
  account: SendingAccount,
  request: TransactionRequest,
  blobs: readonly (BlobSidecar | ProvingBlobSidecar)[],
): Promise<{ rawTransaction: Promise<string>; hash: string; signedTransaction: string }> {
  const signingKey = (account as Partial<BaseWallet>).signingKey;
  if (blobs.length > 0 && signingKey instanceof SigningKey) {
    const tx = Transaction.from({
      ...request,
      blobVersionedHashes: blobs.map((blob) => blob.versionedHash),
    } as TransactionLike<string>);
    tx.signature = signingKey.sign(tx.unsignedHash);
    const serialized = tx.serialized;
    const rawTransaction = provenSidecars(blobs).then((proven) => withSidecar(serialized, proven));
    rawTransaction.catch(() => undefined); // awaited by the caller, unless it stops first
    return { rawTransaction, hash: tx.hash!, signedTransaction: serialized };
  }
  const proven = await provenSidecars(blobs);
  const rawTransaction = await account.signTransaction(
    proven.length > 0
      ? { ...request, blobs: proven.map(({ data, commitment, proof }) => ({ data, commitment, proof })), kzg }
      : request,
  );
  const parsed = Transaction.from(rawTransaction);
  if (!parsed.hash) throw new Error('signed transaction has no hash');
  // A signer other than a local key (a remote one) gives the network form: its sidecar-free form is
  // the parsed transaction with the blobs dropped.
  parsed.blobs = null;
  return {
    rawTransaction: Promise.resolve(rawTransaction),
    hash: parsed.hash,
    signedTransaction: parsed.serialized,
  };
}

/** The blobs with their proofs, once every one is computed. */
function provenSidecars(blobs: readonly (BlobSidecar | ProvingBlobSidecar)[]): Promise<BlobSidecar[]> {
  return Promise.all(blobs.map(async (blob) => ({ ...blob, proof: await blob.proof })));
}

/**
 * The EIP-4844 network form: `0x03 || rlp([tx_payload_body, blobs, commitments, proofs])`, from the
 * signed transaction `0x03 || rlp(tx_payload_body)`.
 */
function withSidecar(signedTransaction: string, blobs: readonly BlobSidecar[]): string {
  const payloadBody = Buffer.from(signedTransaction.slice(4), 'hex');
  const list = (items: readonly Uint8Array[]): Buffer => rlpList(items.map(rlpBytes));
  const wrapped = rlpList([
    payloadBody,
    list(blobs.map((blob) => blob.data)),
    list(blobs.map((blob) => blob.commitment)),
    list(blobs.map((blob) => blob.proof)),
  ]);
  return `0x03${wrapped.toString('hex')}`;
}

function rlpBytes(bytes: Uint8Array): Buffer {
  if (bytes.length === 1 && bytes[0]! < 0x80) return Buffer.from(bytes);
  return Buffer.concat([rlpLength(bytes.length, 0x80), bytes]);
}

/** A list of already-encoded items. */
function rlpList(encodedItems: readonly Uint8Array[]): Buffer {
  const payload = Buffer.concat(encodedItems);
  return Buffer.concat([rlpLength(payload.length, 0xc0), payload]);
}

function rlpLength(length: number, offset: number): Buffer {
  if (length < 56) return Buffer.from([offset + length]);
  const digits = length.toString(16);
  const lengthBytes = Buffer.from(digits.length % 2 ? `0${digits}` : digits, 'hex');
  return Buffer.concat([Buffer.from([offset + 55 + lengthBytes.length]), lengthBytes]);
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
