import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { getAddress, type Wallet } from 'ethers';
import { createLogger, MemoryStore } from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS, testServiceClientOptions } from '@svc/platform/testing';
import { closeClient, createClient, GrpcStatus } from '@svc/proto';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { LinkRefusalReason } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { runTarget, type RunningTarget } from '@svc/runtime';
import { sampleValue, scrape, useDevnet, waitUntil } from '@svc/testkit';
import { jobOrchestratorModule, type JobOrchestratorInstance } from '../src/module.js';
import { ChainSide } from './support/chain-side.js';
import { completionRequest } from './support/completion-stack.js';
import { healthStatus } from './support/health.js';
import { DEPLOYED_MODELS, MODEL } from './support/models.js';
import { RawLink } from './support/raw-link.js';
import { fundedWallet, startReferenceWorker } from './support/reference-worker.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS });
let store: MemoryStore;
let running: RunningTarget;
let registered: Wallet;
const orchestrator = () => running.instances.get('job-orchestrator') as JobOrchestratorInstance;
const linkAddress = () => orchestrator().listeners['worker-link']!;

beforeAll(async () => {
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
        LINK_HEARTBEAT_INTERVAL: '100ms',
        LINK_PRESENCE_TTL: '500ms',
        ...TEST_SERVICE_TOKEN_SETTINGS,
      },
      provided: {
        store,
        chain: {
          rpcUrl: net.anvil.rpcUrl,
          chainId: net.anvil.chainId,
          blockTimeSeconds: null,
          contracts: {
            // Lowercase, as a config may hold it: DescribeChain answers it EIP-55 checksummed.
            jobRegistry: net.deployment.jobRegistryAddress.toLowerCase(),
            workerRegistry: net.deployment.workerRegistryAddress,
            deploymentBlock: net.deployment.deploymentBlock,
          },
          devnet: null,
        },
      },
      logger: createLogger({ service: 'orchestrator-test', level: 'silent' }),
    },
  );
}, 60_000);

afterAll(async () => {
  await running?.stop();
  await store?.close();
});

describe('jobOrchestratorModule', () => {
  it('answers every completion not_configured, nothing submitted, when it has no service signer', async () => {
    const client = createClient(
      JobOrchestrator,
      running.grpcAddress!,
      testServiceClientOptions('job-orchestrator'),
    );
    try {
      const events = [];
      for await (const response of client.runCompletion(
        completionRequest(registered.address, 'hi', 'reservation-no-signer'),
      ))
        events.push(response.event);
      expect(events).toHaveLength(1);
      expect(events[0]).toMatchObject({
        case: 'failed',
        value: { error: { code: 'not_configured' }, jobSubmitted: false },
      });
    } finally {
      closeClient(client);
    }
  });

  it('describes its chain with no delegate when it has no service signer', async () => {
    const client = createClient(
      JobOrchestrator,
      running.grpcAddress!,
      testServiceClientOptions('job-orchestrator'),
    );
    try {
      const described = await client.describeChain({});
      expect(described.chainId).toBe(BigInt(devnet().anvil.chainId));
      expect(described.jobRegistry?.hex).toBe(getAddress(devnet().deployment.jobRegistryAddress));
      expect(described.jobRegistry?.hex).not.toBe(described.jobRegistry?.hex.toLowerCase());
      expect(described.delegate).toBeUndefined();
    } finally {
      closeClient(client);
    }
  });

  it('serves JobOrchestrator to the gateway only: a call without its service token is refused before any handler', async () => {
    const anonymous = createClient(JobOrchestrator, running.grpcAddress!);
    const settler = createClient(
      JobOrchestrator,
      running.grpcAddress!,
      testServiceClientOptions('job-orchestrator', { as: 'payment-settler' }),
    );
    try {
      for (const refused of [anonymous, settler]) {
        await expect(refused.describeChain({})).rejects.toMatchObject({ status: GrpcStatus.UNAUTHENTICATED });
        await expect(
          (async () => {
            for await (const _ of refused.runCompletion(
              completionRequest(registered.address, 'hi', 'reservation-refused'),
            ));
          })(),
        ).rejects.toMatchObject({ status: GrpcStatus.UNAUTHENTICATED });
      }
    } finally {
      closeClient(anonymous);
      closeClient(settler);
    }
  });

  it('serves WorkerLink and grpc.health.v1 alone on its link listener: JobOrchestrator is not there, even to the gateway', async () => {
    expect(linkAddress()).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(linkAddress()).not.toBe(running.grpcAddress);
    expect(await healthStatus(linkAddress(), '')).toBe('SERVING');
    expect(await healthStatus(linkAddress(), 'svc.orchestrator.v1.WorkerLink')).toBe('SERVING');
    await expect(healthStatus(linkAddress(), 'svc.orchestrator.v1.JobOrchestrator')).rejects.toMatchObject({
      code: GrpcStatus.NOT_FOUND,
    });
    const gateway = createClient(
      JobOrchestrator,
      linkAddress(),
      testServiceClientOptions('job-orchestrator'),
    );
    try {
      await expect(gateway.describeChain({})).rejects.toMatchObject({ status: GrpcStatus.UNIMPLEMENTED });
      await expect(
        (async () => {
          for await (const _ of gateway.runCompletion(
            completionRequest(registered.address, 'hi', 'reservation-on-the-link'),
          ));
        })(),
      ).rejects.toMatchObject({ status: GrpcStatus.UNIMPLEMENTED });
    } finally {
      closeClient(gateway);
    }
  });

  it('no longer serves WorkerLink on the process gRPC server', async () => {
    await expect(healthStatus(running.grpcAddress!, 'svc.orchestrator.v1.WorkerLink')).rejects.toMatchObject({
      code: GrpcStatus.NOT_FOUND,
    });
    const link = new RawLink(running.grpcAddress!);
    try {
      link.send({
        case: 'hello',
        value: { worker: { hex: registered.address }, protocolVersion: 2, software: 'raw-link' },
      });
      await expect(link.next()).rejects.toMatchObject({ status: GrpcStatus.UNIMPLEMENTED });
    } finally {
      link.close();
    }
  });

  it('links the reference worker, which dials the link listener', async () => {
    const worker = await startReferenceWorker(devnet(), linkAddress());
    const linked = (live: { address: string }[]) =>
      live.some(({ address }) => address === worker.wallet.address);
    try {
      await waitUntil(() => orchestrator().linkServer!.live(), linked, {
        what: 'the reference worker in presence',
        timeoutMs: 15_000,
      });
      expect(worker.worker.link?.connected).toBe(true);
    } finally {
      await worker.stop();
    }
    await waitUntil(
      () => orchestrator().linkServer!.live(),
      (live) => !linked(live),
      {
        what: 'the stopped worker out of presence',
        timeoutMs: 5_000,
      },
    );
    // The link's calls count in the process's gRPC metrics, like those of its main server.
    const connects = { grpc_service: 'svc.orchestrator.v1.WorkerLink', grpc_method: 'Connect' };
    await waitUntil(
      async () => sampleValue(await scrape(running.metricsUrl!), 'grpc_server_handled_total', connects),
      (ended) => (ended ?? 0) >= 1,
      { what: 'the ended link in grpc_server_handled_total', timeoutMs: 5_000 },
    );
  }, 30_000);

  it('fails to start when its link port is taken, and stops what it began', async () => {
    const taken = linkAddress().slice(linkAddress().lastIndexOf(':') + 1);
    const logger = createLogger({ service: 'orchestrator-test', level: 'silent' });
    await expect(
      runTarget(
        { name: 'job-orchestrator', modules: [jobOrchestratorModule] },
        {
          env: { GRPC_PORT: '0', METRICS_PORT: '0', WORKER_LINK_PORT: taken, ...TEST_SERVICE_TOKEN_SETTINGS },
          provided: { store, chain: devnet().connection() },
          logger,
        },
      ),
    ).rejects.toThrow(`the worker link cannot listen on 127.0.0.1:${taken}`);
    // The running one still serves its workers.
    expect(await healthStatus(linkAddress(), '')).toBe('SERVING');
  });

  it('serves WorkerLink on its listener to workers, which send no service token, with its configured heartbeat, until it stops', async () => {
    const link = new RawLink(linkAddress());
    try {
      const welcome = await link.handshake(registered.address, registered);
      expect(welcome).toMatchObject({
        case: 'welcome',
        value: {
          chainId: BigInt(devnet().anvil.chainId),
          heartbeatInterval: { seconds: 0n, nanos: 100_000_000 },
        },
      });
      link.send({ case: 'heartbeat', value: { models: [MODEL.name], freeJobSlots: 1, freeSessionSlots: 1 } });
      await waitUntil(
        () => orchestrator().linkServer!.live(),
        (live) => live.length === 1,
        {
          what: 'the worker in presence',
          timeoutMs: 5_000,
        },
      );
      const address = linkAddress();
      await running.stop();
      expect(await link.next()).toMatchObject({
        case: 'refusal',
        value: { reason: LinkRefusalReason.SHUTTING_DOWN },
      });
      expect(await store.presence.list('worker-link:workers')).toEqual([]);
      // The listener went with it.
      await expect(healthStatus(address, '')).rejects.toMatchObject({ code: GrpcStatus.UNAVAILABLE });
    } finally {
      link.close();
    }
  });
});
