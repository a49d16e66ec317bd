import { createECDH } from 'node:crypto';
import { fromBinary } from '@bufbuild/protobuf';
import { describe, expect, it } from '@jest/globals';
import { createLogger, MemoryStore, StoreUnavailableError, waitAtMost } from '@svc/platform';
import {
  JobLifecycleEventSchema,
  JobLifecycleKind,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import {
  CompletionRunner,
  type CompletionCall,
  type CompletionEvent,
  type CompletionRunnerOptions,
} from '../../src/completions/completion-runner.js';
import {
  DelegatePath,
  type DelegatePathDependencies,
} from '../../src/completions/payment-paths/delegate-path.js';
import { UnconfirmedFees } from '../../src/completions/payment-paths/unconfirmed-fees.js';
import { LIFECYCLE_OUTBOX, LifecyclePublisher } from '../../src/events/lifecycle-events.js';
import { WaitingCalls } from '../../src/completions/waiting-calls.js';
import { JobOrchestratorMetrics } from '../../src/observability/job-orchestrator-metrics.js';
import { stopCompletions } from '../../src/service.js';

// The completion path against the lifecycle outbox, with every chain and worker part faked: what a
// refused call records (nothing), a store error on the first write (a refusal, not submitted), and the
// call's end while the store is down (the stream ends; the event is recorded once the store is back).

const logger = createLogger({ service: 'runner-outbox-test', level: 'silent' });
const MODEL = 'model-a';
const WALLET = '0x00000000000000000000000000000000000000aa';
const WORKER = '0x00000000000000000000000000000000000000bb';
const fast = { initialDelayMs: 5, maxDelayMs: 20, multiplier: 2, jitter: 0 };

interface Fakes {
  readonly store: MemoryStore;
  readonly lifecycle: LifecyclePublisher;
  readonly runner: CompletionRunner;
  /** A delegate-path call under `reservationId`, on the runner's fakes. */
  readonly call: (reservationId: string, maxFeeWei?: bigint) => CompletionCall;
}

function runnerWith(
  options: {
    store?: MemoryStore;
    maxEvents?: number;
    workers?: readonly string[];
  } = {},
): Fakes {
  const store = options.store ?? new MemoryStore();
  const lifecycle = new LifecyclePublisher(store, logger, {
    maxEvents: options.maxEvents ?? 100,
    retry: fast,
  });
  const publicKey = createECDH('prime256v1').generateKeys();
  const lease = {
    session: { sessionId: 7n, publicKey, worker: WORKER },
    release: async () => undefined,
    discard: async () => undefined,
    jobSubmitted: async () => undefined,
  };
  const fakes = {
    chain: {
      principal: '0x00000000000000000000000000000000000000cc',
      jobRegistry: '0x00000000000000000000000000000000000000dd',
      reads: {
        delegatePosition: async () => ({
          authorized: true,
          balance: 10n ** 18n,
          allowance: 10n ** 18n,
        }),
      },
      submitJobFor: async () => ({
        jobId: 1n,
        hash: '0x' + 'ab'.repeat(32),
        landed: Promise.resolve({
          jobId: 1n,
          fee: 5n,
          tx: { hash: '0x' + 'ab'.repeat(32), blockNumber: 1, events: [] },
        }),
      }),
    },
    chainId: 31337n,
    catalogue: {
      isPaused: async () => false,
      model: async (name: string) => ({ name, modelId: '0x' + '11'.repeat(32), fee: 5n }),
    },
    sessions: { acquire: async () => lease },
    relay: {
      follow: async () => ({ kind: 'committed', text: 'the answer', job: {} }),
      retire: async () => undefined,
    },
    workers: {
      live: async () => (options.workers ?? [MODEL]).map((model) => ({ models: [model] })),
      sendHint: () => undefined,
      acknowledgeFinal: async () => undefined,
    },
    handovers: { record: async () => undefined },
    unconfirmed: new UnconfirmedFees(store),
    jobs: {
      track: async () => undefined,
      holdRun: async () => ({ end: async () => undefined }),
      forget: async () => undefined,
    },
    lifecycle,
    enabled: true,
    runMarkTtlMs: 60_000,
    metrics: new JobOrchestratorMetrics(),
    waiting: new WaitingCalls(),
    logger,
  };
  const runner = new CompletionRunner(fakes as unknown as CompletionRunnerOptions);
  const deps = fakes as unknown as DelegatePathDependencies;
  const call = (reservationId: string, maxFeeWei = 10n): CompletionCall => {
    const requestId = `req-${reservationId}`;
    const terms = { wallet: WALLET, keyId: 'key-1', reservationId, maxFeeWei };
    return {
      requestId,
      model: MODEL,
      messages: [{ role: 'user', content: 'hello' }],
      stream: false,
      payment: new DelegatePath(deps, terms, { requestId, model: MODEL }),
    };
  };
  return { store, lifecycle, runner, call };
}

async function collect(events: AsyncIterable<CompletionEvent>): Promise<CompletionEvent[]> {
  const seen: CompletionEvent[] = [];
  for await (const event of events) seen.push(event);
  return seen;
}

async function outboxKinds(store: MemoryStore): Promise<string[]> {
  const entries = await store.queues.peek(LIFECYCLE_OUTBOX, 100);
  return entries.map((entry) => JobLifecycleKind[fromBinary(JobLifecycleEventSchema, entry.payload).kind]);
}

describe('the completion path and the lifecycle outbox', () => {
  it('records nothing for a call refused before its REQUESTED (no worker, a full outbox)', async () => {
    const { store, runner, call } = runnerWith({ workers: ['another-model'] });
    for (let i = 0; i < 5; i++) {
      const [failed] = await collect(runner.run(call(`r${i}`), new AbortController().signal));
      expect(failed).toMatchObject({
        case: 'failed',
        jobSubmitted: false,
        error: { code: 'not_configured' },
      });
    }
    expect(await store.queues.length(LIFECYCLE_OUTBOX)).toBe(0);

    const full = runnerWith({ maxEvents: 1 });
    await full.store.queues.push(LIFECYCLE_OUTBOX, new Uint8Array([1]));
    for (let i = 0; i < 5; i++) {
      const [failed] = await collect(full.runner.run(full.call(`r${i}`), new AbortController().signal));
      expect(failed).toMatchObject({ case: 'failed', jobSubmitted: false, error: { code: 'job_failed' } });
    }
    // A retry loop against a full outbox does not grow it.
    expect(await full.store.queues.length(LIFECYCLE_OUTBOX)).toBe(1);
  });

  it('still records FAILED for a call refused after its REQUESTED', async () => {
    const { store, runner, call } = runnerWith();
    // The fee (5 wei) rose above the call's maximum while it was prepared: refused after REQUESTED.
    const [failed] = await collect(runner.run(call('r1', 1n), new AbortController().signal));
    expect(failed).toMatchObject({ case: 'failed', jobSubmitted: false, error: { code: 'job_failed' } });
    await runner.drain(1_000);
    expect(await waitAtMost(waitForKinds(store, 2), 2_000)).toBe(true);
    expect(await outboxKinds(store)).toEqual(['REQUESTED', 'FAILED']);
  });

  it('refuses a call, not submitted, when the store fails as its REQUESTED is recorded', async () => {
    const store = new MemoryStore();
    let pushes = 0;
    store.queues.push = () => {
      pushes += 1;
      return Promise.reject(new StoreUnavailableError('queues.push', new Error('down')));
    };
    const { runner, call } = runnerWith({ store });
    const events = await collect(runner.run(call('r1'), new AbortController().signal));
    expect(events).toEqual([
      { case: 'failed', jobSubmitted: false, error: expect.objectContaining({ code: 'job_failed' }) },
    ]);
    expect(await runner.drain(1_000)).toBe(0);
    // No FAILED retried into the store that is down: the gateway releases the hold.
    expect(pushes).toBe(1);
  });

  it('ends the call when it is answered, while the store is down, and records ANSWERED once it is back', async () => {
    const store = new MemoryStore();
    const push = store.queues.push.bind(store.queues);
    let down = false;
    let wentDown = false;
    store.queues.push = (...args) => {
      const kind = fromBinary(JobLifecycleEventSchema, args[1]).kind;
      // Redis goes down right after COMPLETED, as the answer is delivered.
      if (kind === JobLifecycleKind.ANSWERED && !wentDown) down = wentDown = true;
      return down
        ? Promise.reject(new StoreUnavailableError('queues.push', new Error('down')))
        : push(...args);
    };
    const { runner, lifecycle, call } = runnerWith({ store });
    const ended = collect(runner.run(call('r1'), new AbortController().signal));
    expect(await waitAtMost(ended, 1_000)).toBe(true);
    expect((await ended).map((event) => event.case)).toEqual(['started', 'completed']);
    expect(await runner.drain(1_000)).toBe(0);

    down = false;
    await lifecycle.stop(5_000);
    expect(await outboxKinds(store)).toEqual(['REQUESTED', 'SUBMITTED', 'COMPLETED', 'ANSWERED']);
  });

  it('stops within one deadline, however long each part would take', async () => {
    const forever = new Promise<void>(() => undefined);
    const asked: Array<[string, number]> = [];
    const taking = (part: string) => async (timeoutMs: number) => {
      asked.push([part, timeoutMs]);
      await new Promise((resolve) => setTimeout(resolve, timeoutMs));
      return 1;
    };
    const started = Date.now();
    await stopCompletions(
      {
        runner: { drain: taking('calls') },
        keeper: { stop: () => forever },
        lifecycle: { stop: async (timeoutMs) => void (await taking('events')(timeoutMs)) },
        lifecycleRelay: { stop: async (timeoutMs) => void (await taking('relay')(timeoutMs)) },
      },
      600,
      logger,
    );
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(550);
    expect(took).toBeLessThan(900);
    expect(asked.map(([part]) => part)).toEqual(['calls', 'events', 'relay']);
    // The calls get all but a third; the events and the relay share the rest.
    expect(asked[0]![1]).toBeLessThanOrEqual(400);
    expect(asked[0]![1]).toBeGreaterThan(350);
  });
});

async function waitForKinds(store: MemoryStore, count: number): Promise<void> {
  while ((await store.queues.length(LIFECYCLE_OUTBOX)) < count)
    await new Promise((resolve) => setTimeout(resolve, 10));
}
