// The worker link over TLS, end to end over real gRPC: a self-signed certificate made here with openssl,
// served by the orchestrator's side and trusted by the worker through ORCHESTRATOR_LINK_CA_FILE.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Wallet } from 'ethers';
import { createLogger } from '@svc/platform';
import { tlsServerCredentials } from '@svc/proto';
import { selfSignedCertificate, waitUntil } from '@svc/testkit';
import { FinalAnswerJournal } from '../../src/jobs/final-answer-journal.js';
import { isLoopbackTarget, resolveLinkTarget } from '../../src/link/link-target.js';
import { linkBackoff, WorkerLink } from '../../src/link/worker-link.js';
import { TestLinkServer } from '../support/test-link-server.js';
import { makeDataDir, removeDataDir } from '../support/worker-harness.js';

const JOB_REGISTRY = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const CHAIN_ID = 31337n;
const logger = createLogger({ service: 'worker-link-tls-test', level: 'fatal' });
const wallet = Wallet.createRandom();

let certDir: string;
let certFile: string;
let otherCertFile: string;
let server: TestLinkServer;
let dataDir: string;
const links: WorkerLink[] = [];

const selfSigned = (name: string) => selfSignedCertificate(certDir, name);

beforeAll(async () => {
  certDir = await mkdtemp(join(tmpdir(), 'svc-link-tls-'));
  const served = selfSigned('link');
  certFile = served.cert;
  otherCertFile = selfSigned('other').cert;
  server = new TestLinkServer(CHAIN_ID, JOB_REGISTRY, 100, {
    credentials: tlsServerCredentials(await readFile(served.cert), await readFile(served.key)),
    host: 'localhost',
  });
  await server.start();
  dataDir = await makeDataDir();
});

afterEach(async () => {
  for (const link of links.splice(0)) await link.stop();
});

afterAll(async () => {
  await server.stop();
  await removeDataDir(dataDir);
  await rm(certDir, { recursive: true, force: true });
});

async function dial(address: string, caFile: string | undefined): Promise<WorkerLink> {
  const target = await resolveLinkTarget(address, caFile);
  const link = new WorkerLink({
    target: target.target,
    ...(target.credentials ? { credentials: target.credentials } : {}),
    worker: wallet.address,
    signer: wallet,
    chainId: CHAIN_ID,
    jobRegistry: JOB_REGISTRY,
    offer: () => ({ models: ['m'], freeJobSlots: 1, freeSessionSlots: 1, heldSessions: [] }),
    hints: { sessionOpened: async () => true, jobSubmitted: async () => true },
    journal: new FinalAnswerJournal(dataDir),
    backoff: linkBackoff(20, 100),
    defaultHeartbeatMs: 1_000,
    software: 'svc-worker/test',
    logger,
  });
  links.push(link);
  link.start();
  return link;
}

describe('the worker link over TLS', () => {
  it('links and heartbeats through tls:// with the CA file trusted', async () => {
    const link = await dial(`tls://${server.target}`, certFile);
    await waitUntil(async () => link.connected, Boolean, { what: 'the TLS link up', timeoutMs: 10_000 });
    await waitUntil(
      async () => server.framesOf('heartbeat').length,
      (count) => count >= 1,
      { what: 'a heartbeat over TLS', timeoutMs: 5_000 },
    );
    expect(server.verifiedWorkers).toContain(wallet.address);
  });

  it('never links to a server whose certificate it does not trust, nor in plaintext to a TLS server', async () => {
    const before = server.framesOf('hello').length;
    const untrusting = await dial(`tls://${server.target}`, otherCertFile);
    const plaintext = await dial(server.target, undefined);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(untrusting.connected).toBe(false);
    expect(plaintext.connected).toBe(false);
    // Nothing reached the server: no hello, so no challenge was ever seen, let alone signed.
    expect(server.framesOf('hello').length).toBe(before);
  });
});

describe('ORCHESTRATOR_LINK and ORCHESTRATOR_LINK_CA_FILE', () => {
  it('tls:// dials with TLS, a bare host:port in plaintext, and a CA file needs tls://', async () => {
    expect(await resolveLinkTarget('orchestrator:50052', undefined)).toEqual({
      target: 'orchestrator:50052',
      tls: false,
    });
    const tls = await resolveLinkTarget('tls://orchestrator:50052', undefined);
    expect(tls).toMatchObject({ target: 'orchestrator:50052', tls: true });
    expect(tls.credentials).toBeDefined();
    await expect(resolveLinkTarget('orchestrator:50052', certFile)).rejects.toThrow(/tls:\/\//);
    await expect(resolveLinkTarget('https://orchestrator:50052', undefined)).rejects.toThrow(/host:port/);
    expect(isLoopbackTarget('127.0.0.1:50052')).toBe(true);
    expect(isLoopbackTarget('localhost:50052')).toBe(true);
    expect(isLoopbackTarget('[::1]:50052')).toBe(true);
    expect(isLoopbackTarget('orchestrator.example:50052')).toBe(false);
  });
});
