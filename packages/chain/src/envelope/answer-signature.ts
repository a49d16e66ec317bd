import { AbiCoder, getAddress, getBytes, hexlify, keccak256, verifyMessage } from 'ethers';
import { InvalidAnswerSignatureError } from '../errors.js';
import { responseHashOf } from './answer-frame.js';

/**
 * The worker's signature over a final answer (docs/protocol.md, Worker signature): EIP-191 personal_sign
 * over the 32-byte digest keccak256(abi.encode(uint256 chainId, address jobRegistry, uint256 jobId,
 * uint256 attempt, uint256 sessionId, bytes32 keccak256(final frame wire))). JobRegistry's
 * `disputeMismatch` recovers it, so a worker cannot disown an answer it delivered but did not commit.
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

/** Anything that can personal_sign raw bytes: an ethers Wallet or any ethers Signer. */
export interface MessageSigner {
  signMessage(message: Uint8Array): Promise<string>;
}

const SIGNATURE_BYTES = 65;
const SECP256K1_HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

export function finalAnswerDigest(binding: FinalAnswerBinding, finalFrame: Uint8Array): string {
  const encoded = AbiCoder.defaultAbiCoder().encode(
    ['uint256', 'address', 'uint256', 'uint256', 'uint256', 'bytes32'],
    [
      binding.chainId,
      getAddress(binding.jobRegistry),
      binding.jobId,
      binding.attempt,
      binding.sessionId,
      responseHashOf(finalFrame),
    ],
  );
  return keccak256(encoded);
}

/** Signs a final frame as the worker; returns the 65-byte signature as 0x-hex (r ‖ s ‖ v, v ∈ {27, 28}). */
export async function signFinalAnswer(
  signer: MessageSigner,
  binding: FinalAnswerBinding,
  finalFrame: Uint8Array,
): Promise<string> {
  // Raw bytes, not the hex string: personal_sign must hash the 32-byte digest, not 66 characters.
  return signer.signMessage(getBytes(finalAnswerDigest(binding, finalFrame)));
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
    return verifyMessage(getBytes(finalAnswerDigest(binding, finalFrame)), signature);
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
