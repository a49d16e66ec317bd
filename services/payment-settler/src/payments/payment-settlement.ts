import type { Interface, JsonRpcProvider } from 'ethers';
import {
  blobFeeCap,
  provingBlobSidecarOf,
  BlobFeeTooHighError,
  ContractRevertError,
  decodeProtocolLog,
  TransactionRevertedError,
  type SignedTransaction,
  type ChainClient,
  type ContractError,
  type TransactionSender,
} from '@svc/chain';
import { AppError, type Logger } from '@svc/platform';
import { debitAuthorizationOf } from '@svc/x402';
import type { PaymentSettlerMetrics } from '../observability/payment-settler-metrics.js';
import type { HeldPayment, NonceReservations, Settlement, SettlementEnding } from './nonce-reservations.js';
import { refusalCodeOfRevert, type PaymentRefusal } from './refusals.js';

export interface SettleRequest {
  readonly reservationId: string;
  readonly sessionId: bigint;
  /** The encrypted prompt, framed into the settlement's blob. */
  readonly promptWire: Uint8Array;
  /** The caller's own maximum blob base fee, when lower than the settler's. */
  readonly maxFeePerBlobGas?: bigint;
  readonly requestId: string;
  /** Answer once the node accepted the settlement, not once it is mined: the send goes on meanwhile. */
  readonly answerAtBroadcast?: boolean;
}

/** A settlement the node accepted and that is not mined yet: what the session's worker starts from. */
export interface SettlementBroadcast {
  readonly jobId: string;
  /** The transaction as first broadcast (a fee bump replaces it with the same job and blob). */
  readonly txHash: string;
  /** The signed transaction without its blob sidecar, hex. */
  readonly signedTransaction: string;
  readonly kzgCommitment: Uint8Array;
  /** The fee the payment was verified for: what the settlement debits unless the fee changes first. */
  readonly amount: string;
}

export type SettleOutcome =
  | { readonly settled: Settlement }
  | { readonly refused: PaymentRefusal }
  /** The session cannot take a job; nothing was sent and the payment stays held for another session. */
  | { readonly sessionUnusable: string }
  /** Asked with `answerAtBroadcast`: the settlement is under way and its reservation held meanwhile. */
  | { readonly broadcast: SettlementBroadcast };

/** Told of a settlement once the node accepted it. */
type BroadcastListener = (broadcast: SettlementBroadcast) => void;

/** Reverts that say the session, not the payment, is the problem: another session may take the job. */
const SESSION_REVERTS = new Set(['SessionStateInvalid', 'WorkerNotActive', 'NotSessionWorker']);

export interface PaymentSettlementOptions {
  readonly chain: ChainClient;
  readonly provider: JsonRpcProvider;
  /** Sends as the facilitator, from its operators' blob lane. */
  readonly sender: TransactionSender;
  readonly reservations: NonceReservations;
  /** The settler's own blob fee maximum (the sender's). */
  readonly maxFeePerBlobGas: bigint;
  readonly metrics: PaymentSettlerMetrics;
  readonly logger: Logger;
}

/**
 * Settles held payments with `submitJobWithDebit`: one blob transaction that debits the payer and submits
 * the job in the service's session. A payment is never charged twice and never reported failed once it
 * landed: the chain marks its nonce used, one settlement of a reservation runs at a time (a store lock), a
 * repeat returns the recorded settlement, and a send that fails in an unknown way is looked up on chain
 * (the nonce, then its `DebitSettled` log and the job's prompt blob) before it is answered
 * `unexpected_settle_error`; asked again with the same session and prompt, the settler finds it if it
 * landed meanwhile.
 */
export class PaymentSettlement {
  /** Settlements answered at broadcast and still being sent. */
  readonly #sending = new Set<Promise<unknown>>();

  constructor(private readonly options: PaymentSettlementOptions) {}

  /**
   * Settles the payment. Asked to answer at broadcast, it answers `broadcast` once the node accepted the
   * transaction, while the send goes on under the reservation's settling lock exactly as it would have:
   * the next ask of the reservation finds it settled, refused, or still under way.
   */
  async settle(request: SettleRequest): Promise<SettleOutcome> {
    if (!request.answerAtBroadcast) return this.#settle(request);
    let answered = false;
    let announce: BroadcastListener = () => {};
    const broadcast = new Promise<SettlementBroadcast>((resolve) => {
      announce = (announced) => {
        answered = true;
        resolve(announced);
      };
    });
    const settling = this.#settle(request, announce);
    this.#sending.add(settling);
    settling
      .catch((error: unknown) => {
        // Its caller was answered already and hears of this only by asking again.
        if (answered)
          this.options.logger.warn(
            { err: error, reservationId: request.reservationId },
            'a settlement answered at broadcast failed',
          );
      })
      .finally(() => this.#sending.delete(settling));
    // Whatever ends first: an outcome before any broadcast (a refusal, a session that cannot take the
    // job, a settlement already landed) is answered as without the flag.
    return Promise.race([broadcast.then((announced) => ({ broadcast: announced })), settling]);
  }

  /** Waits for the settlements answered at broadcast to finish: a stopping settler lets them land. */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.#sending]);
  }

  async #settle(request: SettleRequest, announce?: BroadcastListener): Promise<SettleOutcome> {
    const { metrics, reservations } = this.options;
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    let settling;
    try {
      settling = await reservations.whileSettling(request.reservationId, () =>
        this.#settleOnce(request, announce),
      );
    } catch (error) {
      metrics.settleFailed(error, seconds());
      throw error;
    }
    if (!settling) {
      // Not a failure: another ask's settlement is under way (one answered at broadcast, not mined yet).
      metrics.settled('in_flight', seconds());
      throw new AppError('unexpected_settle_error', {
        message: 'This payment is being settled by another request: ask again shortly.',
        retryAfterSeconds: 1,
      });
    }
    const outcome = settling.value;
    if ('settled' in outcome) metrics.settled('settled', seconds());
    else if ('refused' in outcome) metrics.settled('refused', seconds(), outcome.refused.code);
    else metrics.settled('session_unusable', seconds());
    return outcome;
  }

  async #settleOnce(request: SettleRequest, announce?: BroadcastListener): Promise<SettleOutcome> {
    const { reservations, logger } = this.options;
    const record = await reservations.get(request.reservationId);
    if (record?.settlement) return { settled: record.settlement };
    const ending = record ? undefined : await reservations.endingOf(request.reservationId);
    if (ending) return endedAs(ending);
    if (!record || !(await reservations.holds(record)))
      return {
        refused: {
          code: 'invalid_transaction_state',
          message:
            "The payment's reservation lapsed before it settled: send the same PAYMENT-SIGNATURE again.",
        },
      };
    const payer = record.authorization.payer;
    // The commitment off the event loop; the proof goes on computing while the transaction is signed.
    const blob = await provingBlobSidecarOf(request.promptWire);
    let broadcast = false;
    try {
      if (request.maxFeePerBlobGas !== undefined && request.maxFeePerBlobGas < this.options.maxFeePerBlobGas)
        await blobFeeCap(this.options.provider, request.maxFeePerBlobGas);
      await reservations.noteSend(record, blob.versionedHash);
      // The session's next job id, named in the transaction (docs/protocol.md, Job ids).
      const jobId = await this.options.chain.jobRegistry.nextJobId(request.sessionId);
      const onSigned = (signed: SignedTransaction) => {
        broadcast = true;
        announce?.({
          jobId: jobId.toString(),
          txHash: signed.hash.toLowerCase(),
          signedTransaction: signed.signedTransaction,
          kzgCommitment: blob.commitment,
          amount: record.amount,
        });
      };
      const mined = await this.options.sender.send({
        to: this.options.chain.addresses.jobRegistry,
        data: this.#settlementCall(record, request.sessionId, jobId),
        blobs: [blob],
        ...(announce ? { onSigned } : {}),
      });
      const settlement = this.#settlementOf(
        record,
        mined.receipt.hash,
        mined.receipt.blockNumber,
        mined.receipt.logs,
      );
      await reservations.markSettled(record, settlement);
      return { settled: settlement };
    } catch (error) {
      const revert = revertOf(error);
      if (revert && SESSION_REVERTS.has(revert.name)) return { sessionUnusable: revert.name };
      const knownUnsent = error instanceof BlobFeeTooHighError || error instanceof ContractRevertError;
      if (!knownUnsent || revert?.name === 'NonceAlreadyUsed') {
        // Perhaps it landed anyway (a lost receipt; our own earlier send of this payment, same blob).
        const ours = [blob.versionedHash, ...(record.sentBlobHashes ?? [])];
        const landed = await this.#landedSettlement(record, ours).catch((lookupError: unknown) => {
          logger.warn({ err: lookupError, payer }, 'settlement lookup failed');
          return undefined;
        });
        if (landed) {
          await reservations.markSettled(record, landed);
          logger.info(
            { err: error, payer, txHash: landed.txHash },
            'the settlement landed although its send failed',
          );
          return { settled: landed };
        }
      }
      const failure = this.#failure(error, revert, payer);
      // Freed only when nothing can land: refused before sending, or mined and reverted. After a
      // broadcast with no outcome the transaction may still be mined: the payment stays held (the chain's
      // nonce decides, and a repeat of this settlement finds it) until its reservation lapses.
      if (knownUnsent || error instanceof TransactionRevertedError) {
        // A caller answered at broadcast heard nothing of this yet: its next ask is told.
        if (broadcast) await reservations.freeEnded(record, endingOf(failure));
        else await reservations.free(record);
      }
      // The caller hears only its code: the cause is for the operator.
      logger.warn({ err: error, payer, revert: revert?.name }, 'settlement failed');
      if (failure instanceof AppError) throw failure;
      return failure;
    }
  }

  #settlementCall(held: HeldPayment, sessionId: bigint, jobId: bigint): string {
    return (this.options.chain.jobRegistry.interface as Interface).encodeFunctionData('submitJobWithDebit', [
      sessionId,
      jobId,
      debitAuthorizationOf(held.authorization),
      held.signature,
      0, // the transaction's one blob
      0, // holds this prompt alone
    ]);
  }

  #settlementOf(
    held: HeldPayment,
    txHash: string,
    blockNumber: number,
    logs: readonly Parameters<typeof decodeProtocolLog>[0][],
  ): Settlement {
    const events = logs.map((log) => decodeProtocolLog(log, this.options.chain.addresses));
    const submitted = events.find((event) => event?.name === 'JobSubmitted');
    const debited = events.find((event) => event?.name === 'DebitSettled');
    if (submitted?.name !== 'JobSubmitted' || debited?.name !== 'DebitSettled')
      throw new Error(`settlement ${txHash} emitted no JobSubmitted and DebitSettled`);
    return {
      txHash: txHash.toLowerCase(),
      jobId: submitted.args.jobId.toString(),
      payer: held.authorization.payer,
      amount: debited.args.amount.toString(),
      network: held.network,
      promptBlobHash: submitted.args.promptBlobHash,
      blockNumber,
    };
  }

  /**
   * The settlement of this payment carrying one of the prompt blobs sent for it (this call's, or an
   * earlier call's of the same reservation), if it is on chain. A nonce used by another settlement
   * (another reservation's, with another blob) is not ours.
   */
  async #landedSettlement(
    held: HeldPayment,
    promptBlobHashes: readonly string[],
  ): Promise<Settlement | undefined> {
    const ours = new Set(promptBlobHashes.map((hash) => hash.toLowerCase()));
    const { chain } = this.options;
    const { payer, nonce } = held.authorization;
    if (!(await chain.isNonceUsed(payer, nonce))) return undefined;
    // A settlement of this payment comes after its verification: the scan starts there, not at genesis.
    const logs = await chain.jobRegistry.queryFilter(
      chain.jobRegistry.filters.DebitSettled(payer, nonce),
      held.verifiedAtBlock,
    );
    for (const log of logs) {
      // The prompt's blob from the job's JobSubmitted, in the settlement's block: the job's record names
      // its prompt only until it is answered (docs/protocol.md, Commit batches), which may be at once.
      const [submitted] = await chain.jobRegistry.queryFilter(
        chain.jobRegistry.filters.JobSubmitted(log.args.jobId),
        log.blockNumber,
        log.blockNumber,
      );
      if (!submitted || !ours.has(submitted.args.promptBlobHash.toLowerCase())) continue;
      return {
        txHash: log.transactionHash.toLowerCase(),
        jobId: log.args.jobId.toString(),
        payer,
        amount: log.args.amount.toString(),
        network: held.network,
        promptBlobHash: submitted.args.promptBlobHash,
        blockNumber: log.blockNumber,
      };
    }
    return undefined;
  }

  /** What a failed send is answered: a refusal, or the error it is thrown as. */
  #failure(
    error: unknown,
    revert: ContractError | undefined,
    payer: string,
  ): { readonly refused: PaymentRefusal } | AppError {
    if (error instanceof BlobFeeTooHighError)
      return new AppError('blob_fee_too_high', {
        message: `The blob base fee (${error.requiredFeePerBlobGas} wei) is above what this service pays (${error.maxFeePerBlobGas} wei); try again later.`,
        retryAfterSeconds: 12,
        cause: error,
      });
    if (revert?.name === 'EnforcedPause')
      return new AppError('not_configured', {
        message: 'JobRegistry is paused: no new jobs run.',
        cause: error,
      });
    if (revert?.name === 'ModelDisabled') return new AppError('model_not_found', { cause: error });
    if (revert || error instanceof TransactionRevertedError) {
      const code = (revert && refusalCodeOfRevert(revert.name)) ?? 'invalid_transaction_state';
      return {
        refused: {
          code,
          message:
            code === 'invalid_transaction_state'
              ? `The chain refused the settlement${revert ? ` (${revert.name})` : ''}; retry shortly.`
              : `The chain refused the settlement with ${revert!.name}.`,
          payer,
        },
      };
    }
    return new AppError('unexpected_settle_error', {
      message:
        'The payment could not be settled; send the same PAYMENT-SIGNATURE again (a payment that did settle is refused as used, never charged twice).',
      cause: error,
    });
  }
}

function endingOf(failure: { readonly refused: PaymentRefusal } | AppError): SettlementEnding {
  return failure instanceof AppError ? { error: { code: failure.code, message: failure.message } } : failure;
}

function endedAs(ending: SettlementEnding): SettleOutcome {
  if ('refused' in ending) return ending;
  throw new AppError(ending.error.code, { message: ending.error.message });
}

function revertOf(error: unknown): ContractError | undefined {
  if (error instanceof ContractRevertError) return error.revert;
  if (error instanceof TransactionRevertedError) return error.revert ?? undefined;
  return undefined;
}
