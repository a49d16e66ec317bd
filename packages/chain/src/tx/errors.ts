import { formatContractError, type ContractError } from '@svc/contracts';

/** The blob base fee is above what this service pays to submit a prompt (`blob_fee_too_high`). */
export class BlobFeeTooHighError extends Error {
  readonly reason = 'blob_fee_too_high' as const;

  constructor(
    /** What the transaction would need per blob gas (the base fee, or a replacement's doubled cap). */
    readonly requiredFeePerBlobGas: bigint,
    readonly maxFeePerBlobGas: bigint,
  ) {
    super(`blob fee ${requiredFeePerBlobGas} wei per blob gas is above the maximum ${maxFeePerBlobGas}`);
    this.name = 'BlobFeeTooHighError';
  }
}

/**
 * The nonce this sender signed at was used by a transaction it did not sign (another replica's gap
 * filler, or someone using the account outside the allocator). Nothing of ours was executed, so the
 * send may be retried with a new nonce.
 */
export class NonceTakenError extends Error {
  readonly reason = 'nonce_taken' as const;

  constructor(
    readonly account: string,
    readonly nonce: number,
  ) {
    super(`nonce ${nonce} of ${account} was used by a transaction this sender did not sign`);
    this.name = 'NonceTakenError';
  }
}

/** A transaction that was signed and sent but not mined after every allowed replacement. */
export class TransactionNotMinedError extends Error {
  readonly reason = 'transaction_not_mined' as const;

  constructor(
    readonly account: string,
    readonly nonce: number,
    /** Every hash signed for this nonce, oldest first; any of them may still be mined later. */
    readonly hashes: readonly string[],
  ) {
    super(`transaction of ${account} at nonce ${nonce} was not mined after ${hashes.length} attempts`);
    this.name = 'TransactionNotMinedError';
  }
}

/** A transaction that passed simulation but reverted when mined (the state changed in between). */
export class TransactionRevertedError extends Error {
  readonly reason = 'transaction_reverted' as const;

  constructor(
    readonly account: string,
    readonly nonce: number,
    readonly transactionHash: string,
    readonly blockNumber: number,
    /**
     * The contract's error, from replaying the call on the state its block left; null when the
     * replay does not revert with a decodable error (out of gas, or the state moved on again).
     */
    readonly revert: ContractError | null = null,
  ) {
    super(
      `transaction ${transactionHash} of ${account} at nonce ${nonce} reverted in block ${blockNumber}` +
        (revert ? ` with ${formatContractError(revert)}` : ''),
    );
    this.name = 'TransactionRevertedError';
  }
}
