import { setTimeout as sleep } from 'node:timers/promises';
import type { JsonRpcProvider, TransactionReceipt, TransactionRequest } from 'ethers';
import type { NonceAllocator } from '@svc/platform';
import { ContractRevertError, withDecodedRevert, type ContractError } from '@svc/contracts';
import type { BlobSidecar } from '../blob/kzg.js';
import type { ProvingBlobSidecar } from '../blob/kzg-thread.js';
import { NonceTakenError, TransactionNotMinedError, TransactionRevertedError } from './errors.js';
import { blobFeeCap, currentExecutionFees, replacementFees, type TransactionFees } from './fees.js';
import { NonceGapRepair } from './nonce-gap-repair.js';
import type { OperatorLanes, SendingAccount, TransactionLane } from './operator-lanes.js';
import type { SentTransactionJournal, SentTransactionRecord } from './sent-transaction-journal.js';
import { signRecordBroadcast, type TransactionBody } from './signed-broadcast.js';

/** What to send: a call (or transfer) with an optional set of blobs. */
export interface TransactionIntent {
  readonly to: string;
  readonly data?: string;
  readonly value?: bigint;
  /**
   * Blobs make it a type-3 transaction sent from the blob lane. A blob's proof may still be computing: the
   * transaction is simulated and signed on its commitment, and only its broadcast waits for the proof.
   */
  readonly blobs?: readonly (BlobSidecar | ProvingBlobSidecar)[];
  /** Skips the gas estimate; the call is still simulated with `eth_call`. */
  readonly gasLimit?: bigint;
  /**
   * Told once, when the first attempt is signed, before its blobs' proofs are awaited and before it is
   * recorded in the journal and broadcast: the fast path hands the signed submission to its worker then
   * (docs/protocol.md, Starting before inclusion), so the worker's checks and first tokens overlap the
   * proof, the broadcast and the node's checks. From then on the send only ends mined, reverted or given
   * up (a submission never broadcast is given up like one never mined), never as a refusal.
   */
  readonly onSigned?: (signed: SignedTransaction) => void;
}

/** A transaction signed and about to be broadcast, not yet mined. */
export interface SignedTransaction {
  readonly hash: string;
  /** The signed transaction without a blob sidecar (EIP-2718 form), as its signature covers it. */
  readonly signedTransaction: string;
}

export interface MinedTransaction {
  readonly receipt: TransactionReceipt;
  readonly account: string;
  readonly nonce: number;
  /** Hashes signed for this nonce before the one that was mined. */
  readonly replacedHashes: readonly string[];
}

export interface TransactionSenderOptions {
  readonly provider: JsonRpcProvider;
  /** The store port's allocator, shared by every replica that sends from these accounts. */
  readonly nonces: NonceAllocator;
  readonly journal: SentTransactionJournal;
  readonly lanes: OperatorLanes;
  /** The most this service pays per blob gas; above it a blob send fails with BlobFeeTooHighError. */
  readonly maxFeePerBlobGas: bigint;
  /** How often a pending transaction is looked at. Default 1 s; a quarter of the block time suits. */
  readonly pollIntervalMs?: number;
  /** A transaction still pending this long is replaced with higher fees. Default 30 s. */
  readonly replaceAfterMs?: number;
  /** Replacements per nonce before giving up. Default 4. */
  readonly maxReplacements?: number;
  /**
   * How long a missing lower nonce may stay missing before it is filled: another replica may be
   * between allocating it and broadcasting. Default 15 s.
   */
  readonly gapGraceMs?: number;
  /** Headroom over the gas estimate, in percent. Default 20. */
  readonly gasHeadroomPercent?: number;
  /** Blocks a receipt must be under before it is returned. Default 1 (the block that mined it). */
  readonly confirmations?: number;
  /** How many times a send restarts with a fresh nonce after its nonce was taken. Default 2. */
  readonly maxNonceRetries?: number;
}

/** Tells the intent's listener of the first signed attempt, once; a listener's error never stops the send. */
function announcer(intent: TransactionIntent): (signed: SignedTransaction) => void {
  let listener = intent.onSigned;
  return (signed) => {
    if (!listener) return;
    const told = listener;
    listener = undefined;
    try {
      told(signed);
    } catch {
      // The listener's own business: the transaction is sent and watched regardless.
    }
  };
}

/** Records this far below a mined nonce are final on any chain worth using and can go. */
const JOURNAL_KEPT_NONCES = 1_024;

interface PendingNonce {
  readonly account: SendingAccount;
  readonly lane: TransactionLane;
  readonly nonce: number;
  readonly body: TransactionBody;
  readonly attempts: SentTransactionRecord[];
}

/**
 * Sends transactions from a pool of operator accounts (blob and plain lanes), with nonces allocated
 * through the store so several replicas can share an account. A send is simulated first (a revert
 * is a ContractRevertError and costs nothing), recorded in the journal before broadcast, and watched
 * until mined: a dropped or stuck transaction is replaced with higher fees, lower nonces left
 * missing are filled, and a nonce taken by someone else restarts the send with a fresh one.
 */
export class TransactionSender {
  readonly #options: TransactionSenderOptions;
  readonly #provider: JsonRpcProvider;
  readonly #gapRepair: NonceGapRepair;
  #chainId: Promise<bigint> | undefined;

  constructor(options: TransactionSenderOptions) {
    this.#options = options;
    this.#provider = options.provider;
    this.#gapRepair = new NonceGapRepair({
      provider: options.provider,
      journal: options.journal,
      maxFeePerBlobGas: options.maxFeePerBlobGas,
      gapGraceMs: options.gapGraceMs ?? 15_000,
      chainId: () => this.#chainIdOf(),
    });
  }

  get lanes(): OperatorLanes {
    return this.#options.lanes;
  }

  async send(intent: TransactionIntent): Promise<MinedTransaction> {
    const lane: TransactionLane = (intent.blobs?.length ?? 0) > 0 ? 'blob' : 'plain';
    // Refuse an unaffordable blob fee before taking an account or a nonce.
    if (lane === 'blob') await blobFeeCap(this.#provider, this.#options.maxFeePerBlobGas);
    const lease = await this.#options.lanes.acquire(lane);
    // Told once, whichever nonce the send ends up signed at.
    const announce = announcer(intent);
    try {
      for (let retry = 0; ; retry++) {
        try {
          return await this.#sendOnce(lease.account, lane, intent, announce);
        } catch (error) {
          if (!(error instanceof NonceTakenError) || retry >= (this.#options.maxNonceRetries ?? 2))
            throw error;
        }
      }
    } finally {
      lease.release();
    }
  }

  async #sendOnce(
    account: SendingAccount,
    lane: TransactionLane,
    intent: TransactionIntent,
    announce: (signed: SignedTransaction) => void,
  ): Promise<MinedTransaction> {
    // The fee reads go out beside the simulation: their round trips overlap (a revert is still reported
    // first, before anything is signed).
    const pricing = this.#fees(lane);
    pricing.catch(() => undefined);
    const body = await this.#simulate(account, intent);
    const fees = await pricing;
    for (;;) {
      const floor = await this.#provider.getTransactionCount(account.address, 'pending');
      const nonce = await this.#options.nonces.allocate(account.address, floor);
      const first = await signRecordBroadcast(
        this.#context(await this.#chainIdOf()),
        account,
        nonce,
        body,
        fees,
        { lane, purpose: 'call', replaces: null },
        announce,
      );
      if (first.outcome === 'nonce_too_low') {
        // The chain moved past the allocator (the account was used outside it): catch it up, retry.
        await this.#options.nonces.reset(
          account.address,
          await this.#provider.getTransactionCount(account.address, 'pending'),
        );
        continue;
      }
      return this.#watch({ account, lane, nonce, body, attempts: [first.record] });
    }
  }

  async #fees(lane: TransactionLane): Promise<TransactionFees> {
    const [execution, maxFeePerBlobGas] = await Promise.all([
      currentExecutionFees(this.#provider),
      lane === 'blob' ? blobFeeCap(this.#provider, this.#options.maxFeePerBlobGas) : null,
    ]);
    return { ...execution, maxFeePerBlobGas };
  }

  /** Estimates gas with the blobs' hashes visible to the call, so a revert is caught unpaid. */
  async #simulate(account: SendingAccount, intent: TransactionIntent): Promise<TransactionBody> {
    const blobs = intent.blobs ?? [];
    const call = this.#callOf(account.address, {
      to: intent.to,
      data: intent.data ?? '0x',
      value: intent.value ?? 0n,
      blobs,
    });
    let gasLimit = intent.gasLimit;
    if (gasLimit === undefined) {
      const estimate = await withDecodedRevert(() => this.#provider.estimateGas(call));
      gasLimit = (estimate * BigInt(100 + (this.#options.gasHeadroomPercent ?? 20))) / 100n;
    } else {
      await withDecodedRevert(() => this.#provider.call(call));
    }
    return { to: intent.to, data: call.data, value: call.value, gasLimit, blobs };
  }

  /** The transaction as an `eth_call`, blob hashes included so `blobhash` sees them. */
  #callOf(from: string, body: Omit<TransactionBody, 'gasLimit'>) {
    return {
      from,
      to: body.to,
      data: body.data,
      value: body.value,
      ...(body.blobs.length > 0
        ? {
            type: 3,
            blobVersionedHashes: body.blobs.map((blob) => blob.versionedHash),
            maxFeePerBlobGas: this.#options.maxFeePerBlobGas,
          }
        : {}),
    } satisfies TransactionRequest;
  }

  /**
   * Why a mined transaction reverted: its call replayed on the state its block left. Only the
   * block's later transactions can make that differ from what the transaction saw, so this is its
   * error but in a rare race; a replay that passes or fails otherwise (out of gas) gives null.
   */
  async #revertOf(pending: PendingNonce, blockNumber: number): Promise<ContractError | null> {
    try {
      await withDecodedRevert(() =>
        this.#provider.call({
          ...this.#callOf(pending.account.address, pending.body),
          gasLimit: pending.body.gasLimit,
          blockTag: blockNumber,
        }),
      );
    } catch (error) {
      if (error instanceof ContractRevertError) return error.revert;
      // The replay only explains the failure; a node that cannot replay leaves it unexplained.
    }
    return null;
  }

  async #watch(pending: PendingNonce): Promise<MinedTransaction> {
    const pollIntervalMs = this.#options.pollIntervalMs ?? 1_000;
    const replaceAfterMs = this.#options.replaceAfterMs ?? 30_000;
    const maxReplacements = this.#options.maxReplacements ?? 4;
    const address = pending.account.address;
    for (; ; await sleep(pollIntervalMs)) {
      const found = await this.#receiptOf(pending);
      if (found) {
        const confirmations = this.#options.confirmations ?? 1;
        if (confirmations <= 1 || (await found.receipt.confirmations()) >= confirmations)
          return this.#mined(pending, found);
        continue;
      }
      const latestNonce = await this.#provider.getTransactionCount(address, 'latest');
      if (latestNonce > pending.nonce) {
        // The nonce is used. A receipt of ours may have landed between the two reads: look again.
        const late = await this.#receiptOf(pending);
        if (late) continue;
        throw new NonceTakenError(address, pending.nonce);
      }
      if (latestNonce < pending.nonce) {
        await this.#gapRepair.repair(pending.account, pending.lane, latestNonce, pending.nonce);
      }
      const current = pending.attempts.at(-1)!;
      const dropped = (await this.#provider.getTransaction(current.hash)) === null;
      const stuck = Date.now() - current.signedAtMs >= replaceAfterMs;
      if (dropped || stuck) {
        if (pending.attempts.length > maxReplacements) {
          throw new TransactionNotMinedError(
            address,
            pending.nonce,
            pending.attempts.map((attempt) => attempt.hash),
          );
        }
        await this.#replace(pending, current);
      }
    }
  }

  async #replace(pending: PendingNonce, previous: SentTransactionRecord): Promise<void> {
    const fees = replacementFees(
      previous,
      await currentExecutionFees(this.#provider),
      this.#options.maxFeePerBlobGas,
    );
    const attempt = await signRecordBroadcast(
      this.#context(await this.#chainIdOf()),
      pending.account,
      pending.nonce,
      pending.body,
      fees,
      { lane: pending.lane, purpose: 'call', replaces: previous.hash },
    );
    // 'nonce_too_low' means one of the earlier attempts (or someone else) was just mined: the next
    // look finds out which. 'underpriced' keeps the higher caps as the base of the next bump.
    pending.attempts.push(attempt.record);
  }

  /** The receipt of whichever of our attempts at this nonce was mined, newest first. */
  async #receiptOf(
    pending: PendingNonce,
  ): Promise<{ receipt: TransactionReceipt; attempt: SentTransactionRecord } | null> {
    for (const attempt of [...pending.attempts].reverse()) {
      const receipt = await this.#provider.getTransactionReceipt(attempt.hash);
      if (receipt) return { receipt, attempt };
    }
    return null;
  }

  async #mined(
    pending: PendingNonce,
    { receipt, attempt }: { receipt: TransactionReceipt; attempt: SentTransactionRecord },
  ): Promise<MinedTransaction> {
    await this.#options.journal.forgetBelow(pending.account.address, pending.nonce - JOURNAL_KEPT_NONCES);
    if (receipt.status !== 1) {
      throw new TransactionRevertedError(
        pending.account.address,
        pending.nonce,
        receipt.hash,
        receipt.blockNumber,
        await this.#revertOf(pending, receipt.blockNumber),
      );
    }
    return {
      receipt,
      account: pending.account.address,
      nonce: pending.nonce,
      replacedHashes: pending.attempts.filter((other) => other !== attempt).map((other) => other.hash),
    };
  }

  #context(chainId: bigint) {
    return { provider: this.#provider, journal: this.#options.journal, chainId };
  }

  #chainIdOf(): Promise<bigint> {
    this.#chainId ??= this.#provider.getNetwork().then((network) => network.chainId);
    return this.#chainId;
  }
}
