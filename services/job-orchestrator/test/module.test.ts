import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { getAddress, type Wallet } from 'ethers';
import { createLogger, MemoryStore } from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS, testServiceClientOptions } from '@svc/platform/testing';
import { closeClient, createClient, GrpcStatus } from '@svc/proto';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { LinkRefusalReason } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { runTarget, type RunningTarget } from '@svc/runtime';
import { useDevnet, waitUntil } from '@svc/testkit';
import { jobOrchestratorModule, type JobOrchestratorInstance } from '../src/module.js';
import { ChainSide } from './support/chain-side.js';
import { completionRequest } from './support/completion-stack.js';
import { DEPLOYED_MODELS, MODEL } from './support/models.js';
import { RawLink } from './support/raw-link.js';
import { fundedWallet } from './support/reference-worker.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS });
let store: MemoryStore;
let running: RunningTarget;
let registered: Wallet;

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

  it('serves WorkerLink on the process gRPC server to workers, which send no service token, with its configured heartbeat, until it stops', async () => {
    const link = new RawLink(running.grpcAddress!);
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
      const instance = running.instances.get('job-orchestrator') as JobOrchestratorInstance;
      await waitUntil(
        () => instance.linkServer!.live(),
        (live) => live.length === 1,
        {
          what: 'the worker in presence',
          timeoutMs: 5_000,
        },
      );
      await running.stop();
      expect(await link.next()).toMatchObject({
        case: 'refusal',
        value: { reason: LinkRefusalReason.SHUTTING_DOWN },
      });
      expect(await store.presence.list('worker-link:workers')).toEqual([]);
    } finally {
      link.close();
    }
  });
});
