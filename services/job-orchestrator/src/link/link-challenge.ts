import { randomBytes } from 'node:crypto';
import { getAddress, hexlify } from 'ethers';
import { recoverLinkChallengeSigner, type LinkChallengeFields } from '@svc/chain';

/** What a link challenge binds a signature to, so it is worth nothing elsewhere or later. */
export interface ChallengeBinding {
  readonly orchestrator: string;
  readonly chainId: bigint;
  readonly jobRegistry: string;
  readonly worker: string;
}

export interface LinkChallenge {
  /** The typed data's fields, sent to the worker as they are (docs/protocol.md, Worker link). */
  readonly fields: LinkChallengeFields;
  readonly expiresAtMs: number;
}

/**
 * A fresh challenge: EIP-712 `LinkChallenge` fields naming the orchestrator, the chain, JobRegistry, the
 * worker and a random nonce, expiring in whole seconds (the worker signs the seconds).
 */
export function issueChallenge(binding: ChallengeBinding, nowMs: number, ttlMs: number): LinkChallenge {
  const expiresAt = BigInt(Math.floor((nowMs + ttlMs) / 1000));
  return {
    fields: {
      orchestrator: binding.orchestrator,
      chainId: binding.chainId,
      jobRegistry: getAddress(binding.jobRegistry),
      worker: getAddress(binding.worker),
      nonce: hexlify(randomBytes(32)),
      expiresAt,
    },
    expiresAtMs: Number(expiresAt) * 1000,
  };
}

/** Whether `signature` is `worker`'s EIP-712 signature of the challenge; false for any malformed one. */
export function isSignedBy(challenge: LinkChallenge, signature: Uint8Array, worker: string): boolean {
  return recoverLinkChallengeSigner(challenge.fields, signature) === getAddress(worker);
}
