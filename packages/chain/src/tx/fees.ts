import type { JsonRpcProvider } from 'ethers';
import { BlobFeeTooHighError } from './errors.js';

export interface ExecutionFees {
  readonly maxFeePerGas: bigint;
  readonly maxPriorityFeePerGas: bigint;
}

export interface TransactionFees extends ExecutionFees {
  /** null for a transaction without blobs. */
  readonly maxFeePerBlobGas: bigint | null;
}

/** geth's txpool refuses a same-nonce replacement that does not raise both caps by at least 10%. */
const PLAIN_REPLACEMENT_BUMP_PERCENT = 12n;
/** geth's blobpool wants every cap (blob fee cap included) at least doubled. */
const BLOB_REPLACEMENT_BUMP_PERCENT = 100n;

/** EIP-1559 caps as the node suggests them now. */
export async function currentExecutionFees(provider: JsonRpcProvider): Promise<ExecutionFees> {
  const data = await provider.getFeeData();
  if (data.maxFeePerGas === null || data.maxPriorityFeePerGas === null) {
    throw new Error('the node offers no EIP-1559 fee data');
  }
  return { maxFeePerGas: data.maxFeePerGas, maxPriorityFeePerGas: data.maxPriorityFeePerGas };
}

/**
 * The blob fee cap for a new blob transaction: twice the current blob base fee (it rises at most
 * 12.5% a block, so this survives several full blocks), clamped to `max`. A base fee above `max`
 * is refused before anything is signed.
 */
export async function blobFeeCap(provider: JsonRpcProvider, max: bigint): Promise<bigint> {
  const baseFee = BigInt((await provider.send('eth_blobBaseFee', [])) as string);
  if (baseFee > max) throw new BlobFeeTooHighError(baseFee, max);
  const doubled = baseFee * 2n;
  return doubled > max ? max : doubled;
}

function raised(value: bigint, percent: bigint): bigint {
  // Rounded up so a bump of a tiny value still moves it.
  return value + (value * percent + 99n) / 100n + (percent > 0n && value === 0n ? 1n : 0n);
}

function atLeast(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}

/**
 * Caps for a replacement of `previous` at the same nonce: the pool's minimum bump over the previous
 * caps, or the current market when that is higher. A blob replacement whose doubled blob fee cap
 * passes `maxFeePerBlobGas` cannot be made and is refused.
 */
export function replacementFees(
  previous: TransactionFees,
  market: ExecutionFees,
  maxFeePerBlobGas: bigint,
): TransactionFees {
  const bump =
    previous.maxFeePerBlobGas === null ? PLAIN_REPLACEMENT_BUMP_PERCENT : BLOB_REPLACEMENT_BUMP_PERCENT;
  const maxPriorityFeePerGas = atLeast(
    raised(previous.maxPriorityFeePerGas, bump),
    market.maxPriorityFeePerGas,
  );
  const maxFeePerGas = atLeast(
    atLeast(raised(previous.maxFeePerGas, bump), market.maxFeePerGas),
    maxPriorityFeePerGas,
  );
  if (previous.maxFeePerBlobGas === null)
    return { maxFeePerGas, maxPriorityFeePerGas, maxFeePerBlobGas: null };
  const blob = raised(previous.maxFeePerBlobGas, bump);
  if (blob > maxFeePerBlobGas) throw new BlobFeeTooHighError(blob, maxFeePerBlobGas);
  return { maxFeePerGas, maxPriorityFeePerGas, maxFeePerBlobGas: blob };
}
