// The all-in-one target (`npm start`) in this process: how it wires its units together.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { JobOrchestratorInstance } from '@svc/job-orchestrator';
import { createLogger } from '@svc/platform';
import { checkPeers, runTarget, type RunningTarget } from '@svc/runtime';
import { freePort, waitUntil } from '@svc/testkit';
import type { WorkerInstance } from '@svc/worker';
import { allInOne, targets } from '../src/targets.js';

describe('the all-in-one target', () => {
  let stateDir: string;
  let running: RunningTarget | undefined;

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'svc-all-in-one-'));
    running = await runTarget(allInOne, {
      env: { STATE_DIR: stateDir, PORT: String(await freePort()), DEVNET_PORT: '0' },
      logger: createLogger({ service: 'all-in-one-test', level: 'silent' }),
    });
  }, 120_000);

  afterAll(async () => {
    await running?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('starts each unit after the peers it names', () => {
    expect([...running!.instances.keys()]).toEqual([
      'key-service',
      'payment-settler',
      'job-orchestrator',
      'gateway',
      'worker-1',
      'worker-2',
    ]);
  });

  it("links its workers through the orchestrator's worker link listener, on loopback apart from the gRPC server", async () => {
    const orchestrator = running!.instances.get('job-orchestrator') as JobOrchestratorInstance;
    const linkAddress = orchestrator.listeners['worker-link'];
    expect(linkAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(linkAddress).not.toBe(running!.grpcAddress);
    const workers = [...running!.instances]
      .filter(([name]) => name.startsWith('worker-'))
      .map(([, instance]) => instance as WorkerInstance);
    expect(workers).toHaveLength(2);
    // The process's gRPC server no longer serves WorkerLink: a worker in presence came over the listener.
    const live = await waitUntil(
      () => orchestrator.linkServer!.live(),
      (linked) => workers.every(({ worker }) => linked.some(({ address }) => address === worker!.address)),
      { what: 'both workers linked', timeoutMs: 15_000 },
    );
    expect(live).toHaveLength(2);
    for (const { worker } of workers) expect(worker!.link?.connected).toBe(true);
  });
});

describe('the targets', () => {
  it('are all, and each service alone under its own name, every one knowing the services of the deployment', () => {
    const services = allInOne.modules.map((module) => module.name);
    expect(Object.keys(targets)).toEqual(['all', ...services]);
    for (const module of allInOne.modules)
      expect(targets[module.name]).toEqual({ name: module.name, modules: [module], services });
    expect(allInOne.services).toEqual(services);
  });

  it('name only services of the deployment as peers, in no cycle', () => {
    expect(() => checkPeers(allInOne.modules, allInOne.services)).not.toThrow();
  });
});
