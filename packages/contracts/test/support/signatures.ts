import {
  AbiCoder,
  Signature,
  concat,
  getBytes,
  keccak256,
  toBeHex,
  type BytesLike,
  type Signer,
  type TypedDataDomain,
} from 'ethers';

const SECP256K1_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/** The same signature with s replaced by n - s (and v flipped): valid for plain ecrecover, malleable. */
export function toHighS(signature: string): { signature: string; s: string } {
  const { r, s, v } = Signature.from(signature);
  const highS = toBeHex(SECP256K1_ORDER - BigInt(s), 32);
  return { signature: concat([r, highS, v === 27 ? '0x1c' : '0x1b']), s: highS };
}

/** EIP-2098 64-byte compact form of a signature. */
export function toCompact(signature: string): string {
  return Signature.from(signature).compactSerialized;
}

/** Which final answer a worker signs: this job's attempt, in this session, of this registry on this chain. */
export interface FinalAnswerBinding {
  chainId: bigint | number;
  jobRegistry: string;
  jobId: bigint;
  attempt: bigint | number;
  sessionId: bigint;
}

/** JobRegistry's EIP-712 domain and the `FinalAnswer` type (docs/protocol.md, Worker signature). */
export function finalAnswerTypedData(binding: FinalAnswerBinding, ciphertext: BytesLike) {
  return {
    domain: {
      name: 'JobRegistry',
      version: '1',
      chainId: binding.chainId,
      verifyingContract: binding.jobRegistry,
    } satisfies TypedDataDomain,
    types: {
      FinalAnswer: [
        { name: 'jobId', type: 'uint256' },
        { name: 'attempt', type: 'uint256' },
        { name: 'sessionId', type: 'uint256' },
        { name: 'responseHash', type: 'bytes32' },
      ],
    },
    value: {
      jobId: binding.jobId,
      attempt: binding.attempt,
      sessionId: binding.sessionId,
      responseHash: keccak256(ciphertext),
    },
  };
}

/**
 * The worker's EIP-712 signature over a final answer (docs/protocol.md, Worker signature), written from
 * the spec here: @svc/chain depends on this package, not the reverse.
 */
export async function signFinalAnswer(
  worker: Signer,
  binding: FinalAnswerBinding,
  ciphertext: BytesLike,
): Promise<string> {
  const { domain, types, value } = finalAnswerTypedData(binding, ciphertext);
  return worker.signTypedData(domain, types, value);
}

/**
 * What a worker signed before: EIP-191 personal_sign over the raw 32-byte digest
 * keccak256(abi.encode(chainId, jobRegistry, jobId, attempt, sessionId, keccak256(ciphertext))). Any
 * personal_sign the worker gave for other reasons (a link challenge whose bytes equal this digest) was
 * such a signature; the contract must take none of them.
 */
export async function personalSignFinalAnswerDigest(
  worker: Signer,
  binding: FinalAnswerBinding,
  ciphertext: BytesLike,
): Promise<string> {
  const digest = keccak256(
    AbiCoder.defaultAbiCoder().encode(
      ['uint256', 'address', 'uint256', 'uint256', 'uint256', 'bytes32'],
      [
        binding.chainId,
        binding.jobRegistry,
        binding.jobId,
        binding.attempt,
        binding.sessionId,
        keccak256(ciphertext),
      ],
    ),
  );
  return worker.signMessage(getBytes(digest));
}
