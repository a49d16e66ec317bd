import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Wallet, getBytes, hexlify, randomBytes } from 'ethers';
import { linkChallengeDigest, signLinkChallenge } from '@svc/chain';
import { MemoryStore } from '@svc/platform';
import { LinkRefusalReason } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { useDevnet, waitUntil } from '@svc/testkit';
import { isSignedBy, issueChallenge } from '../../src/link/link-challenge.js';
import { RegistryWorkerAdmission } from '../../src/link/worker-admission.js';
import { ChainSide } from '../support/chain-side.js';
import { DEPLOYED_MODELS, MODEL } from '../support/models.js';
import { OrchestratorReplica, TEST_LINK_TIMING } from '../support/orchestrator-harness.js';
import { RawLink } from '../support/raw-link.js';
import { fundedWallet } from '../support/reference-worker.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS });
let store: MemoryStore;
let replica: OrchestratorReplica;
let registered: Wallet;
const links: RawLink[] = [];

beforeAll(async () => {
  store = new MemoryStore();
  replica = new OrchestratorReplica(devnet(), store);
  await replica.start();
  registered = await fundedWallet(devnet());
  await new ChainSide(devnet(), devnet().wallet(4)).registerWorker(registered);
});

afterEach(() => {
  for (const link of links.splice(0)) link.close();
});

afterAll(async () => {
  await replica.stop();
  await store.close();
});

function dial(): RawLink {
  const link = new RawLink(replica.target);
  links.push(link);
  return link;
}

describe('admission to the worker link', () => {
  it('welcomes an active registered worker with the chain id, JobRegistry and heartbeat interval', async () => {
    const welcome = await dial().handshake(registered.address, registered);
    expect(welcome?.case).toBe('welcome');
    if (welcome?.case !== 'welcome') return;
    expect(welcome.value.chainId).toBe(BigInt(devnet().anvil.chainId));
    expect(welcome.value.jobRegistry?.hex).toBe(devnet().deployment.jobRegistryAddress);
    expect(welcome.value.heartbeatInterval).toMatchObject({
      seconds: 0n,
      nanos: TEST_LINK_TIMING.heartbeatIntervalMs * 1_000_000,
    });
    expect(welcome.value.linkId).not.toBe('');
  });

  it('refuses a key that is not a registered worker', async () => {
    const stranger = Wallet.createRandom();
    const refusal = await dial().handshake(stranger.address, stranger);
    expect(refusal).toMatchObject({
      case: 'refusal',
      value: { reason: LinkRefusalReason.NOT_ACTIVE_WORKER },
    });
  });

  it('refuses a signature by another key than the claimed worker', async () => {
    const link = dial();
    const refusal = await link.handshake(registered.address, Wallet.createRandom());
    expect(refusal).toMatchObject({ case: 'refusal', value: { reason: LinkRefusalReason.CHALLENGE_FAILED } });
    expect(await link.next()).toBeUndefined();
  });

  it('refuses a malformed signature', async () => {
    const link = dial();
    link.send({ case: 'hello', value: { worker: { hex: registered.address }, protocolVersion: 2 } });
    expect((await link.next())?.case).toBe('challenge');
    link.send({ case: 'challengeResponse', value: { signature: new Uint8Array(65).fill(7) } });
    expect(await link.next()).toMatchObject({
      case: 'refusal',
      value: { reason: LinkRefusalReason.CHALLENGE_FAILED },
    });
  });

  it('refuses a link that does not open with a hello, or speaks another protocol version', async () => {
    const first = dial();
    first.send({ case: 'heartbeat', value: { models: [MODEL.name], freeJobSlots: 1, freeSessionSlots: 1 } });
    expect(await first.next()).toMatchObject({
      case: 'refusal',
      value: { reason: LinkRefusalReason.PROTOCOL_VIOLATION },
    });
    // Version 1 signed a challenge text with personal_sign: no longer served.
    for (const protocolVersion of [1, 3]) {
      const other = dial();
      other.send({ case: 'hello', value: { worker: { hex: registered.address }, protocolVersion } });
      expect(await other.next()).toMatchObject({
        case: 'refusal',
        value: { reason: LinkRefusalReason.PROTOCOL_VIOLATION },
      });
    }
  });

  it('lists a heartbeating worker, then ends its link and lets its presence lapse once it goes silent', async () => {
    const link = dial();
    expect((await link.handshake(registered.address, registered))?.case).toBe('welcome');
    link.send({ case: 'heartbeat', value: { models: [MODEL.name], freeJobSlots: 2, freeSessionSlots: 6 } });
    const live = await waitUntil(
      () => replica.server.live(),
      (workers) => workers.length === 1,
      { what: 'the worker in presence', timeoutMs: 5_000 },
    );
    expect(live[0]).toMatchObject({ address: registered.address, freeJobSlots: 2, freeSessionSlots: 6 });
    // Kept only for one TTL: a replica that crashes withdraws nothing, the store forgets the worker then.
    expect(live[0]!.expiresAtMs - Date.now()).toBeLessThanOrEqual(TEST_LINK_TIMING.presenceTtlMs);
    // Silent from now on, with the stream still open.
    const startedAt = Date.now();
    expect(await link.next()).toMatchObject({
      case: 'refusal',
      value: { reason: LinkRefusalReason.HEARTBEAT_MISSED },
    });
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(TEST_LINK_TIMING.presenceTtlMs - 50);
    expect(await replica.server.live()).toEqual([]);
  });

  it('ends the older link when the same worker links again', async () => {
    const older = dial();
    expect((await older.handshake(registered.address, registered))?.case).toBe('welcome');
    const newer = dial();
    expect((await newer.handshake(registered.address, registered))?.case).toBe('welcome');
    expect(await older.next()).toMatchObject({
      case: 'refusal',
      value: { reason: LinkRefusalReason.REPLACED },
    });
  });
});

describe('worker admission over WorkerRegistry', () => {
  it('remembers whether a worker is active for its TTL, then reads the chain again', async () => {
    const service = new ChainSide(devnet(), devnet().wallet(4));
    const leaving = await fundedWallet(devnet());
    await service.registerWorker(leaving);
    const admission = new RegistryWorkerAdmission(replica.chain, 500);
    expect(await admission.isActiveWorker(leaving.address)).toBe(true);
    await service.deregisterWorker(leaving);
    expect(await replica.chain.isWorkerActive(leaving.address)).toBe(false);
    expect(await admission.isActiveWorker(leaving.address.toLowerCase())).toBe(true);
    await waitUntil(
      () => admission.isActiveWorker(leaving.address),
      (active) => !active,
      { what: 'the deregistration noticed', timeoutMs: 5_000 },
    );
  });
});

describe('the link challenge', () => {
  const binding = () => ({
    orchestrator: 'svc job-orchestrator',
    chainId: 31337n,
    jobRegistry: devnet().deployment.jobRegistryAddress,
    worker: registered.address,
  });
  const expectation = () => ({
    chainId: 31337n,
    jobRegistry: devnet().deployment.jobRegistryAddress,
    worker: registered.address,
    nowMs: Date.now(),
  });

  it('names the orchestrator, chain, JobRegistry and worker, with a fresh 32-byte nonce each time', () => {
    const first = issueChallenge(binding(), 1_000_500, 30_000);
    const second = issueChallenge(binding(), 1_000_500, 30_000);
    expect(first.fields).toMatchObject({
      orchestrator: 'svc job-orchestrator',
      chainId: 31337n,
      jobRegistry: binding().jobRegistry,
      worker: registered.address,
      expiresAt: 1_030n,
    });
    expect(first.fields.nonce).toMatch(/^0x[0-9a-f]{64}$/);
    expect(first.fields.nonce).not.toBe(second.fields.nonce);
    // Whole seconds: the worker signs the seconds, and the orchestrator holds it to the same instant.
    expect(first.expiresAtMs).toBe(1_030_000);
  });

  it('accepts only the claimed worker’s EIP-712 signature of those exact fields', async () => {
    const challenge = issueChallenge(binding(), Date.now(), 30_000);
    const signature = getBytes(await signLinkChallenge(registered, challenge.fields, expectation()));
    expect(isSignedBy(challenge, signature, registered.address)).toBe(true);
    expect(isSignedBy(challenge, signature, Wallet.createRandom().address)).toBe(false);
    expect(isSignedBy(challenge, signature.subarray(0, 64), registered.address)).toBe(false);
    for (const changed of [
      { nonce: hexlify(randomBytes(32)) },
      { expiresAt: challenge.fields.expiresAt + 1n },
      { orchestrator: 'another orchestrator' },
      { chainId: 1n },
    ]) {
      expect(
        isSignedBy(
          { ...challenge, fields: { ...challenge.fields, ...changed } },
          signature,
          registered.address,
        ),
      ).toBe(false);
    }
    // A personal_sign of anything (the version 1 sign-in) is not a signature of the challenge.
    const personal = getBytes(await registered.signMessage(getBytes(linkChallengeDigest(challenge.fields))));
    expect(isSignedBy(challenge, personal, registered.address)).toBe(false);
  });
});
