// The orchestrator's worker link listener serving TLS (WORKER_LINK_TLS_CERT_FILE, WORKER_LINK_TLS_KEY_FILE),
// with a self-signed certificate made here with openssl: a worker that trusts it links; plaintext does not.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { Wallet } from 'ethers';
import { createLogger, MemoryStore } from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS } from '@svc/platform/testing';
import { tlsChannelCredentials } from '@svc/proto';
import { runTarget, type RunningTarget } from '@svc/runtime';
import { selfSignedCertificate, useDevnet } from '@svc/testkit';
import { linkTlsCredentials } from '../../src/link/link-tls.js';
import { jobOrchestratorModule, type JobOrchestratorInstance } from '../../src/module.js';
import { ChainSide } from '../support/chain-side.js';
import { DEPLOYED_MODELS } from '../support/models.js';
import { RawLink } from '../support/raw-link.js';
import { fundedWallet } from '../support/reference-worker.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS });
let store: MemoryStore;
let running: RunningTarget;
let registered: Wallet;
let certDir: string;
let cert: string;
let key: string;
const links: RawLink[] = [];
const linkAddress = () =>
  (running.instances.get('job-orchestrator') as JobOrchestratorInstance).listeners['worker-link']!;

beforeAll(async () => {
  certDir = await mkdtemp(join(tmpdir(), 'svc-orchestrator-link-tls-'));
  ({ cert, key } = selfSignedCertificate(certDir, 'link'));
  const net = devnet();
  registered = await fundedWallet(net);
  await new ChainSide(net, net.wallet(4)).registerWorker(registered);
  store = new MemoryStore();
  running = await runTarget(
    { name: 'job-orchestrator', modules: [jobOrchestratorModule] },
    {
      env: {
        GRPC_PORT: '0',
        METRICS_PORT: '0',
        WORKER_LINK_PORT: '0',
        WORKER_LINK_TLS_CERT_FILE: cert,
        WORKER_LINK_TLS_KEY_FILE: key,
        ...TEST_SERVICE_TOKEN_SETTINGS,
      },
      provided: {
        store,
        chain: {
          rpcUrl: net.anvil.rpcUrl,
          chainId: net.anvil.chainId,
          blockTimeSeconds: null,
          contracts: {
            jobRegistry: net.deployment.jobRegistryAddress,
            workerRegistry: net.deployment.workerRegistryAddress,
            deploymentBlock: net.deployment.deploymentBlock,
          },
          devnet: null,
        },
      },
      logger: createLogger({ service: 'orchestrator-link-tls-test', level: 'silent' }),
    },
  );
}, 60_000);

afterAll(async () => {
  for (const link of links) link.close();
  await running?.stop();
  await store?.close();
  await rm(certDir, { recursive: true, force: true });
});

describe('the worker link listener with TLS', () => {
  it('names its address tls://, and admits a worker that trusts its certificate', async () => {
    expect(linkAddress()).toMatch(/^tls:\/\/127\.0\.0\.1:\d+$/);
    const link = new RawLink(linkAddress().slice('tls://'.length), {
      credentials: tlsChannelCredentials(await readFile(cert)),
    });
    links.push(link);
    const welcome = await link.handshake(registered.address, registered);
    expect(welcome?.case).toBe('welcome');
  });

  it('serves no plaintext worker', async () => {
    const link = new RawLink(linkAddress().slice('tls://'.length));
    links.push(link);
    await expect(link.handshake(registered.address, registered)).rejects.toThrow();
  });

  it('takes a certificate and its key together, or neither', async () => {
    await expect(
      linkTlsCredentials({ WORKER_LINK_TLS_CERT_FILE: cert, WORKER_LINK_TLS_KEY_FILE: undefined }),
    ).rejects.toThrow(/set both or neither/);
    await expect(
      linkTlsCredentials({ WORKER_LINK_TLS_CERT_FILE: undefined, WORKER_LINK_TLS_KEY_FILE: undefined }),
    ).resolves.toBeUndefined();
  });
});
