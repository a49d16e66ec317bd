import { randomBytes } from 'node:crypto';
import { getAddress, hexlify, verifyMessage } from 'ethers';

/** What a link challenge binds a signature to, so it is worth nothing elsewhere or later. */
export interface ChallengeBinding {
  readonly orchestrator: string;
  readonly chainId: bigint;
  readonly jobRegistry: string;
  readonly worker: string;
}

export interface LinkChallenge {
  readonly message: string;
  readonly expiresAtMs: number;
}

/** The text a worker signs (EIP-191): the orchestrator, the chain, JobRegistry, the worker, a fresh nonce. */
export function issueChallenge(binding: ChallengeBinding, nowMs: number, ttlMs: number): LinkChallenge {
  const expiresAtMs = nowMs + ttlMs;
  const message = [
    `${binding.orchestrator} asks worker ${getAddress(binding.worker)} to prove its address.`,
    `Chain: ${binding.chainId}`,
    `JobRegistry: ${getAddress(binding.jobRegistry)}`,
    `Nonce: ${randomBytes(16).toString('hex')}`,
    `Expires: ${new Date(expiresAtMs).toISOString()}`,
  ].join('\n');
  return { message, expiresAtMs };
}

/** Whether `signature` is `worker`'s EIP-191 signature of `message`; false for any malformed signature. */
export function isSignedBy(message: string, signature: Uint8Array, worker: string): boolean {
  if (signature.length !== 65) return false;
  try {
    return verifyMessage(message, hexlify(signature)) === getAddress(worker);
  } catch {
    return false;
  }
}
