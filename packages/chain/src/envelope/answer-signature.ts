import {
  Signature,
  TypedDataEncoder,
  getAddress,
  getBytes,
  hexlify,
  recoverAddress,
  type TypedDataDomain,
  type TypedDataField,
} from 'ethers';
import { InvalidAnswerSignatureError } from '../errors.js';
import { responseHashOf } from './answer-frame.js';

/**
 * The worker's signature over a final answer (docs/protocol.md, Worker signature): EIP-712 typed data
 * `FinalAnswer(uint256 jobId,uint256 attempt,uint256 sessionId,bytes32 responseHash)` in JobRegistry's
 * domain (name "JobRegistry", version "1", chainId, verifyingContract = JobRegistry). JobRegistry's
 * `disputeMismatch` recovers it, so a worker cannot disown an answer it delivered but did not commit.
 * Typed data, never a personal_sign message: nothing else a worker signs (its link challenge, a sign-in
 * message, a transaction) can hash to the same digest.
 */
export interface FinalAnswerBinding {
  readonly chainId: bigint;
  readonly jobRegistry: string;
  readonly jobId: bigint;
  /**
   * The attempt the final answers and the session it ran in. Without them, a final the worker signed
   * for an attempt that timed out would "prove" a mismatch against the attempt it later answered honestly.
   */
  readonly attempt: number;
  readonly sessionId: bigint;
}

/** Anything that can sign EIP-712 typed data: an ethers Wallet or any ethers Signer. */
export interface TypedDataSigner {
  signTypedData(
    domain: TypedDataDomain,
    types: Record<string, TypedDataField[]>,
    value: Record<string, unknown>,
  ): Promise<string>;
}

/** The EIP-712 type of a final answer; its hash is JobRegistry's `FINAL_ANSWER_TYPEHASH`. */
export const FINAL_ANSWER_TYPES: Record<string, TypedDataField[]> = {
  FinalAnswer: [
    { name: 'jobId', type: 'uint256' },
    { name: 'attempt', type: 'uint256' },
    { name: 'sessionId', type: 'uint256' },
    { name: 'responseHash', type: 'bytes32' },
  ],
};

const SIGNATURE_BYTES = 65;
const SECP256K1_HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

/** JobRegistry's EIP-712 domain (the one its x402 debit authorizations use too). */
export function finalAnswerDomain(
  binding: Pick<FinalAnswerBinding, 'chainId' | 'jobRegistry'>,
): TypedDataDomain {
  return {
    name: 'JobRegistry',
    version: '1',
    chainId: binding.chainId,
    verifyingContract: getAddress(binding.jobRegistry),
  };
}

function finalAnswerValue(binding: FinalAnswerBinding, finalFrame: Uint8Array): Record<string, unknown> {
  return {
    jobId: binding.jobId,
    attempt: binding.attempt,
    sessionId: binding.sessionId,
    responseHash: responseHashOf(finalFrame),
  };
}

/** The EIP-712 digest the worker signs: keccak256(0x1901 ‖ domainSeparator ‖ hashStruct(FinalAnswer)). */
export function finalAnswerDigest(binding: FinalAnswerBinding, finalFrame: Uint8Array): string {
  return TypedDataEncoder.hash(
    finalAnswerDomain(binding),
    FINAL_ANSWER_TYPES,
    finalAnswerValue(binding, finalFrame),
  );
}

/** Signs a final frame as the worker; returns the 65-byte signature as 0x-hex (r ‖ s ‖ v, v ∈ {27, 28}). */
export async function signFinalAnswer(
  signer: TypedDataSigner,
  binding: FinalAnswerBinding,
  finalFrame: Uint8Array,
): Promise<string> {
  return signer.signTypedData(
    finalAnswerDomain(binding),
    FINAL_ANSWER_TYPES,
    finalAnswerValue(binding, finalFrame),
  );
}

/**
 * The address that signed a final frame. Accepts only what the contract accepts: 65 bytes, v of 27
 * or 28, and low s; anything else is an {@link InvalidAnswerSignatureError}.
 */
export function recoverFinalAnswerSigner(
  binding: FinalAnswerBinding,
  finalFrame: Uint8Array,
  signature: string,
): string {
  let bytes: Uint8Array;
  try {
    bytes = getBytes(signature);
  } catch (error) {
    throw new InvalidAnswerSignatureError('malformed', 'the signature is not hex', { cause: error });
  }
  if (bytes.length !== SIGNATURE_BYTES) {
    throw new InvalidAnswerSignatureError(
      'malformed',
      `a signature is ${SIGNATURE_BYTES} bytes, got ${bytes.length}`,
    );
  }
  const v = bytes[SIGNATURE_BYTES - 1];
  if (v !== 27 && v !== 28) {
    throw new InvalidAnswerSignatureError('malformed', `signature v must be 27 or 28, got ${v}`);
  }
  // OpenZeppelin's ECDSA (and so the contract) refuses the malleable twin with s > n/2.
  const s = BigInt(hexlify(bytes.subarray(32, 64)));
  if (s === 0n || s > SECP256K1_HALF_ORDER) {
    throw new InvalidAnswerSignatureError(
      'non_canonical',
      'the signature s is not in the lower half of the curve order',
    );
  }
  try {
    return recoverAddress(finalAnswerDigest(binding, finalFrame), Signature.from(signature));
  } catch (error) {
    throw new InvalidAnswerSignatureError('malformed', 'no address recovers from the signature', {
      cause: error,
    });
  }
}

/** Whether `signature` is `worker`'s signature over this final frame; false for any malformed signature. */
export function isFinalAnswerSignedBy(
  worker: string,
  binding: FinalAnswerBinding,
  finalFrame: Uint8Array,
  signature: string,
): boolean {
  try {
    return recoverFinalAnswerSigner(binding, finalFrame, signature) === getAddress(worker);
  } catch (error) {
    if (error instanceof InvalidAnswerSignatureError) return false;
    throw error;
  }
}
