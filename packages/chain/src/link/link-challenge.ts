import {
  Signature,
  TypedDataEncoder,
  getAddress,
  getBytes,
  hexlify,
  isAddress,
  isHexString,
  recoverAddress,
  type TypedDataDomain,
  type TypedDataField,
} from 'ethers';
import type { TypedDataSigner } from '../envelope/answer-signature.js';

/**
 * The worker link's sign-in (docs/protocol.md, Worker link): the worker proves its address by signing
 * EIP-712 typed data `LinkChallenge(string orchestrator,address worker,address jobRegistry,bytes32 nonce,
 * uint64 expiresAt)` in a domain of its own (name "svc worker link", version "1", chainId, no verifying
 * contract). The orchestrator sends the fields, never text: the worker builds the typed data itself and
 * signs nothing else on the link, so what it signs there can never be a final answer (JobRegistry's
 * domain, another type), a sign-in message or a transaction.
 */
export interface LinkChallengeFields {
  /** How the orchestrator's deployment names itself: printable ASCII, 1 to 64 characters. */
  readonly orchestrator: string;
  readonly chainId: bigint;
  readonly jobRegistry: string;
  readonly worker: string;
  /** 32 random bytes, 0x-hex. */
  readonly nonce: string;
  /** Unix seconds after which the orchestrator no longer accepts the signature. */
  readonly expiresAt: bigint;
}

export const LINK_CHALLENGE_TYPES: Record<string, TypedDataField[]> = {
  LinkChallenge: [
    { name: 'orchestrator', type: 'string' },
    { name: 'worker', type: 'address' },
    { name: 'jobRegistry', type: 'address' },
    { name: 'nonce', type: 'bytes32' },
    { name: 'expiresAt', type: 'uint64' },
  ],
};

/** The longest a worker lets a challenge it signs stay valid (it refuses one expiring later). */
export const LINK_CHALLENGE_MAX_TTL_MS = 5 * 60_000;

const ORCHESTRATOR_NAME = /^[\x20-\x7e]{1,64}$/;
const SIGNATURE_BYTES = 65;
const SECP256K1_HALF_ORDER = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

export function linkChallengeDomain(chainId: bigint): TypedDataDomain {
  return { name: 'svc worker link', version: '1', chainId };
}

function linkChallengeValue(fields: LinkChallengeFields): Record<string, unknown> {
  return {
    orchestrator: fields.orchestrator,
    worker: getAddress(fields.worker),
    jobRegistry: getAddress(fields.jobRegistry),
    nonce: fields.nonce,
    expiresAt: fields.expiresAt,
  };
}

export function linkChallengeDigest(fields: LinkChallengeFields): string {
  return TypedDataEncoder.hash(
    linkChallengeDomain(fields.chainId),
    LINK_CHALLENGE_TYPES,
    linkChallengeValue(fields),
  );
}

/** A challenge the worker will not sign, and why. */
export class LinkChallengeRefusedError extends Error {
  override readonly name = 'LinkChallengeRefusedError';
}

/** What the worker holds the challenge against: its own chain, JobRegistry and address, and its clock. */
export interface LinkChallengeExpectation {
  readonly chainId: bigint;
  readonly jobRegistry: string;
  readonly worker: string;
  readonly nowMs: number;
  readonly maxTtlMs?: number;
}

/**
 * Checks a challenge before the worker signs it: well-formed fields naming this worker, its chain and its
 * JobRegistry, expiring in the future but not too far. Throws {@link LinkChallengeRefusedError}.
 */
export function checkLinkChallenge(fields: LinkChallengeFields, expected: LinkChallengeExpectation): void {
  const refuse = (why: string): never => {
    throw new LinkChallengeRefusedError(`link challenge refused: ${why}`);
  };
  if (!ORCHESTRATOR_NAME.test(fields.orchestrator))
    refuse('the orchestrator name is not 1 to 64 printable ASCII characters');
  if (fields.chainId !== expected.chainId)
    refuse(`it is for chain ${fields.chainId}, this worker works on ${expected.chainId}`);
  if (!isAddress(fields.jobRegistry) || getAddress(fields.jobRegistry) !== getAddress(expected.jobRegistry))
    refuse(
      `it names JobRegistry ${fields.jobRegistry}, this worker's is ${getAddress(expected.jobRegistry)}`,
    );
  if (!isAddress(fields.worker) || getAddress(fields.worker) !== getAddress(expected.worker))
    refuse(`it names worker ${fields.worker}, not this worker`);
  if (!isHexString(fields.nonce, 32)) refuse('the nonce is not 32 bytes');
  const expiresAtMs = Number(fields.expiresAt) * 1000;
  if (expiresAtMs <= expected.nowMs) refuse('it has expired');
  if (expiresAtMs > expected.nowMs + (expected.maxTtlMs ?? LINK_CHALLENGE_MAX_TTL_MS))
    refuse('it expires too far in the future');
}

/** Checks the challenge against `expected`, then signs it as typed data; returns the 65-byte signature. */
export async function signLinkChallenge(
  signer: TypedDataSigner,
  fields: LinkChallengeFields,
  expected: LinkChallengeExpectation,
): Promise<string> {
  checkLinkChallenge(fields, expected);
  return signer.signTypedData(
    linkChallengeDomain(fields.chainId),
    LINK_CHALLENGE_TYPES,
    linkChallengeValue(fields),
  );
}

/** The address that signed the challenge, or undefined for a malformed (or high-s) signature. */
export function recoverLinkChallengeSigner(
  fields: LinkChallengeFields,
  signature: Uint8Array | string,
): string | undefined {
  try {
    const bytes = getBytes(signature);
    if (bytes.length !== SIGNATURE_BYTES) return undefined;
    const v = bytes[SIGNATURE_BYTES - 1];
    const s = BigInt(hexlify(bytes.subarray(32, 64)));
    if ((v !== 27 && v !== 28) || s === 0n || s > SECP256K1_HALF_ORDER) return undefined;
    return recoverAddress(linkChallengeDigest(fields), Signature.from(hexlify(bytes)));
  } catch {
    return undefined;
  }
}
