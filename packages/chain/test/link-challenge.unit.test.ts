import { describe, expect, it } from '@jest/globals';
import { AbiCoder, Wallet, concat, getBytes, hexlify, id, keccak256, randomBytes, toBeHex } from 'ethers';
import {
  AnswerFrameKind,
  LINK_CHALLENGE_MAX_TTL_MS,
  LinkChallengeRefusedError,
  checkLinkChallenge,
  encryptAnswerFrame,
  generateReplyKey,
  isFinalAnswerSignedBy,
  linkChallengeDigest,
  recoverLinkChallengeSigner,
  signLinkChallenge,
  type LinkChallengeFields,
} from '../src/index.js';

const worker = Wallet.createRandom();
const JOB_REGISTRY = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const NOW_MS = 1_800_000_000_000;
const expectation = { chainId: 31337n, jobRegistry: JOB_REGISTRY, worker: worker.address, nowMs: NOW_MS };
const challenge: LinkChallengeFields = {
  orchestrator: 'svc job-orchestrator',
  chainId: 31337n,
  jobRegistry: JOB_REGISTRY,
  worker: worker.address,
  nonce: hexlify(randomBytes(32)),
  expiresAt: BigInt(NOW_MS / 1000 + 30),
};

function refusal(fields: Partial<LinkChallengeFields>, nowMs = NOW_MS): string {
  try {
    checkLinkChallenge({ ...challenge, ...fields }, { ...expectation, nowMs });
  } catch (error) {
    if (error instanceof LinkChallengeRefusedError) return error.message;
    throw error;
  }
  throw new Error('the challenge was accepted');
}

describe('the link challenge a worker signs', () => {
  it('is EIP-712 LinkChallenge in the "svc worker link" domain, spelled out from the spec', async () => {
    const coder = AbiCoder.defaultAbiCoder();
    const domainSeparator = keccak256(
      coder.encode(
        ['bytes32', 'bytes32', 'bytes32', 'uint256'],
        [
          id('EIP712Domain(string name,string version,uint256 chainId)'),
          id('svc worker link'),
          id('1'),
          challenge.chainId,
        ],
      ),
    );
    const structHash = keccak256(
      coder.encode(
        ['bytes32', 'bytes32', 'address', 'address', 'bytes32', 'uint64'],
        [
          id(
            'LinkChallenge(string orchestrator,address worker,address jobRegistry,bytes32 nonce,uint64 expiresAt)',
          ),
          id(challenge.orchestrator),
          challenge.worker,
          challenge.jobRegistry,
          challenge.nonce,
          challenge.expiresAt,
        ],
      ),
    );
    expect(linkChallengeDigest(challenge)).toBe(keccak256(concat(['0x1901', domainSeparator, structHash])));
    const signature = await signLinkChallenge(worker, challenge, expectation);
    expect(recoverLinkChallengeSigner(challenge, signature)).toBe(worker.address);
    expect(recoverLinkChallengeSigner({ ...challenge, nonce: hexlify(randomBytes(32)) }, signature)).not.toBe(
      worker.address,
    );
    expect(recoverLinkChallengeSigner(challenge, getBytes(signature).subarray(0, 64))).toBeUndefined();
  });

  it('is refused unless it names this chain, JobRegistry and worker, and expires soon but not yet', () => {
    expect(refusal({ chainId: 1n })).toMatch(/chain 1/);
    expect(refusal({ jobRegistry: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512' })).toMatch(/JobRegistry/);
    expect(refusal({ jobRegistry: 'not an address' })).toMatch(/JobRegistry/);
    expect(refusal({ worker: Wallet.createRandom().address })).toMatch(/worker/);
    expect(refusal({ expiresAt: BigInt(NOW_MS / 1000) })).toMatch(/expired/);
    expect(refusal({ expiresAt: BigInt((NOW_MS + LINK_CHALLENGE_MAX_TTL_MS) / 1000 + 1) })).toMatch(
      /too far/,
    );
    expect(refusal({ nonce: '0x1234' })).toMatch(/nonce/);
    expect(refusal({ orchestrator: '' })).toMatch(/orchestrator name/);
    expect(refusal({ orchestrator: 'x'.repeat(65) })).toMatch(/orchestrator name/);
    expect(refusal({ orchestrator: 'line\nbreak' })).toMatch(/orchestrator name/);
    expect(() => checkLinkChallenge(challenge, expectation)).not.toThrow();
  });

  it('signs nothing it refused', async () => {
    const signer = {
      signed: 0,
      async signTypedData(): Promise<string> {
        this.signed += 1;
        return '0x';
      },
    };
    await expect(
      signLinkChallenge(signer, { ...challenge, chainId: 1n }, expectation),
    ).rejects.toBeInstanceOf(LinkChallengeRefusedError);
    expect(signer.signed).toBe(0);
  });

  it('can never be a signed final, whatever fields an orchestrator picks', async () => {
    // The audit's attack, now: the orchestrator chooses every field it can (the nonce, the name); the
    // worker's signature is over its own domain and type, which no FinalAnswer digest shares.
    const finalFrame = encryptAnswerFrame(AnswerFrameKind.Final, 'an honest answer', generateReplyKey(), {
      jobId: 5n,
      attempt: 1,
      seq: 1,
    });
    const binding = { chainId: 31337n, jobRegistry: JOB_REGISTRY, jobId: 5n, attempt: 1, sessionId: 3n };
    const chosen = { ...challenge, nonce: toBeHex(keccak256(finalFrame), 32) };
    const signature = await signLinkChallenge(worker, chosen, expectation);
    expect(isFinalAnswerSignedBy(worker.address, binding, finalFrame, signature)).toBe(false);
  });
});
