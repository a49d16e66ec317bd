import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SessionState } from '@svc/chain';
import { ChainClock } from '@svc/anvil';
import { useDevnet } from '@svc/testkit';
import { MODEL, DEPLOYED_MODELS } from '../support/models.js';
import { ServiceSide } from '../support/service-side.js';
import {
  fundedWorkerWallet,
  makeDataDir,
  removeDataDir,
  startTestWorker,
  type TestWorker,
} from '../support/worker-harness.js';

// A service that lost its records never closes the sessions it opened: the worker frees those slots itself
// once the chain says a session sat idle past JobRegistry's inactivity timeout.
const INACTIVITY_TIMEOUT_SECONDS = 120;
const devnet = useDevnet({
  models: DEPLOYED_MODELS,
  warmBlobs: true,
  protocol: { inactivityTimeoutSeconds: INACTIVITY_TIMEOUT_SECONDS },
});
let service: ServiceSide;
let test: TestWorker;
let dataDir: string;

beforeAll(async () => {
  const net = devnet();
  service = new ServiceSide(net.wallet(4), net.deployment, BigInt(net.anvil.chainId));
  await service.deposit();
  dataDir = await makeDataDir();
  test = await startTestWorker(net, { wallet: await fundedWorkerWallet(net), dataDir });
}, 60_000);

afterAll(async () => {
  await test?.worker.stop();
  if (dataDir) await removeDataDir(dataDir);
});

describe('the idle session sweep', () => {
  it('closes a held session idle past the inactivity timeout, frees its slot, and keeps a fresh one', async () => {
    const { worker } = test;
    const idle = await service.openSession(worker.address, MODEL.name);
    await service.waitForClaim(idle);
    const clock = new ChainClock(devnet().provider);
    await clock.advance(INACTIVITY_TIMEOUT_SECONDS - 30);
    const fresh = await service.openSession(worker.address, MODEL.name);
    await service.waitForClaim(fresh);
    const before = worker.status().freeSessionSlots;

    // Not idle long enough yet: nothing is closed.
    expect(await worker.idleSessions.sweep()).toEqual([]);
    expect((await service.chain.getSession(idle)).state).toBe(SessionState.Active);

    await clock.advance(31);
    expect(await worker.idleSessions.sweep()).toEqual([idle]);
    expect((await service.chain.getSession(idle)).state).toBe(SessionState.Closed);
    expect((await service.chain.getSession(fresh)).state).toBe(SessionState.Active);
    expect(worker.status().freeSessionSlots).toBe(before + 1);
  }, 60_000);
});
