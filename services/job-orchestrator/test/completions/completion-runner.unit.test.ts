import { createECDH } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { ContractRevertError, JobState } from '@svc/chain';
import { AppError, createLogger } from '@svc/platform';
import { JobLifecycleKind } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import type { AttemptOutcome } from '../../src/completions/answer-relay.js';
import {
  CompletionRunner,
  type CompletionCall,
  type CompletionEvent,
  type CompletionRunnerOptions,
} from '../../src/completions/completion-runner.js';
import { DelegatePath } from '../../src/completions/payment-paths/delegate-path.js';
import { PerCallPath } from '../../src/completions/payment-paths/per-call-path.js';
import type { SettlementOutcome } from '../../src/completions/per-call-settlement.js';
import type { CallIdentity, LifecycleStep } from '../../src/events/lifecycle-events.js';
import { JobOrchestratorMetrics } from '../../src/observability/job-orchestrator-metrics.js';

// The completion runner with every chain, store and worker part faked: each payment path through
// submission, relay, retry, dispute and refund in milliseconds. The devnet suites beside this one run the
// same paths against anvil and real workers.

const logger = createLogger({ service: 'runner-test', level: 'silent' });
const MODEL = 'model-a';
const WALLET = '0x00000000000000000000000000000000000000aa';
const PRINCIPAL = '0x00000000000000000000000000000000000000cc';
const FEE = 5n;
const txHash = (n: number) => '0x' + n.toString(16).padStart(64, '0');

type Relayed = { deltas?: string[]; outcome: AttemptOutcome };

/** Fakes of every port, scripted per test: the relay's attempts and the settler's answers. */
class Fakes {
  readonly published: { kind: string; step: LifecycleStep; identity: CallIdentity }[] = [];
  readonly leases: { sessionId: bigint; worker: string; released?: 'kept' | 'discarded' }[] = [];
  readonly sent: string[] = [];
  attempts: Relayed[] = [];
  settlements: SettlementOutcome[] = [];
  submitRefusals: ('session_unusable' | Error)[] = [];
  #nextSession = 1n;

  readonly chain = {
    principal: PRINCIPAL,
    jobRegistry: '0x00000000000000000000000000000000000000dd',
    reads: {
      delegatePosition: async () => ({ authorized: true, balance: 10n ** 18n, allowance: 10n ** 18n }),
      parameters: async () => ({ maxAttempts: 2 }),
      getJob: async () => ({ state: JobState.Failed, fee: FEE }),
    },
    submitJobFor: async () => {
      const refusal = this.submitRefusals.shift();
      if (refusal === 'session_unusable')
        throw new ContractRevertError(
          { name: 'SessionStateInvalid', args: { sessionId: 1n, state: 3n } } as never,
          undefined,
        );
      if (refusal) throw refusal;
      this.sent.push('submitJobFor');
      return { jobId: 1n, fee: FEE, tx: { hash: txHash(1), blockNumber: 1, events: [] } };
    },
    timeoutJob: async () => this.#tx('timeoutJob', 2),
    reassignJob: async () => this.#tx('reassignJob', 3),
    refundJob: async () => this.#tx('refundJob', 4),
    disputeMismatch: async () => this.#tx('disputeMismatch', 5),
  };

  readonly perCall = {
    settle: async (): Promise<SettlementOutcome> => {
      this.sent.push('settle');
      return this.settlements.shift() ?? { refused: new AppError('job_failed') };
    },
  };

  readonly options: CompletionRunnerOptions;

  constructor() {
    const publicKey = createECDH('prime256v1').generateKeys();
    this.options = {
      payments: undefined as never,
      chain: this.chain as unknown as CompletionRunnerOptions['chain'],
      chainId: 31337n,
      catalogue: {
        isPaused: async () => false,
        model: async (name: string) => ({ name, modelId: '0x' + '11'.repeat(32), fee: FEE }),
      },
      sessions: {
        acquire: async () => {
          const lease: Fakes['leases'][number] = {
            sessionId: this.#nextSession++,
            worker: `0xw${this.leases.length + 1}`,
          };
          this.leases.push(lease);
          return {
            session: { ...lease, owner: WALLET, model: MODEL, modelId: '0x11', publicKey },
            release: async () => void (lease.released ??= 'kept'),
            discard: async () => void (lease.released ??= 'discarded'),
          } as never;
        },
      },
      relay: {
        follow: async (_attempt, onDelta) => {
          const next = this.attempts.shift();
          if (!next) throw new Error('no attempt scripted');
          for (const delta of next.deltas ?? []) onDelta(delta);
          return next.outcome;
        },
        retire: async () => undefined,
      },
      workers: {
        live: async () => [{ models: [MODEL] }] as never,
        sendHint: () => true,
        acknowledgeFinal: async () => true,
      },
      jobs: {
        track: async () => undefined,
        holdRun: async () => ({ end: async () => undefined }) as never,
        forget: async () => undefined,
      },
      lifecycle: {
        requested: async () => undefined,
        publish: async (identity: CallIdentity, kind: JobLifecycleKind, step: LifecycleStep) => {
          this.published.push({ kind: JobLifecycleKind[kind], step, identity });
        },
      },
      enabled: true,
      runMarkTtlMs: 60_000,
      metrics: new JobOrchestratorMetrics(),
      logger,
    };
  }

  get runner(): CompletionRunner {
    return new CompletionRunner(this.options);
  }

  delegateCall(stream = true): CompletionCall {
    const terms = { wallet: WALLET, keyId: 'key-1', reservationId: 'res-1', maxFeeWei: 10n };
    return this.#call(
      new DelegatePath({ chain: this.chain as never, chainId: 31337n }, terms, this.#ids()),
      stream,
    );
  }

  perCallCall(stream = true): CompletionCall {
    const terms = { paymentReservationId: 'pay-1', payer: WALLET, amountWei: FEE };
    const deps = {
      perCall: this.perCall as never,
      lifecycle: this.options.lifecycle,
      principal: PRINCIPAL,
      settlementRechecksMs: [1, 1, 1],
    };
    return this.#call(new PerCallPath(deps, terms, this.#ids()), stream);
  }

  kinds(): string[] {
    return this.published.map((event) => event.kind);
  }

  #ids() {
    return { requestId: 'req-1', model: MODEL };
  }

  #call(payment: CompletionCall['payment'], stream: boolean): CompletionCall {
    return { requestId: 'req-1', model: MODEL, messages: [{ role: 'user', content: 'hi' }], stream, payment };
  }

  async #tx(method: string, n: number) {
    this.sent.push(method);
    return { hash: txHash(n), blockNumber: n, events: [] };
  }
}

async function run(fakes: Fakes, call: CompletionCall): Promise<CompletionEvent[]> {
  const events: CompletionEvent[] = [];
  for await (const event of fakes.runner.run(call, new AbortController().signal)) events.push(event);
  // Events recorded after the call's end are not awaited by the run.
  await new Promise((resolve) => setImmediate(resolve));
  return events;
}

const job = { state: JobState.Completed, fee: FEE } as never;
const committed = (text: string): AttemptOutcome => ({ kind: 'committed', text, job });
const failed: AttemptOutcome = {
  kind: 'failed',
  reason: 'worker failed',
  job: { state: JobState.Failed, fee: FEE } as never,
};

describe('the completion runner (fakes)', () => {
  it('delegate path: submits, streams, verifies and answers once, with every lifecycle step', async () => {
    const fakes = new Fakes();
    fakes.attempts = [{ deltas: ['Hel', 'lo'], outcome: committed('Hello!') }];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.map((event) => event.case)).toEqual(['started', 'delta', 'delta', 'delta', 'completed']);
    expect(events.at(-1)).toMatchObject({ case: 'completed', text: 'Hello!', charged: FEE });
    expect(fakes.sent).toEqual(['submitJobFor']);
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'COMPLETED', 'ANSWERED']);
    expect(fakes.published[0]!.identity).toMatchObject({
      paymentPath: 'delegate',
      payer: WALLET,
      reservationId: 'res-1',
    });
    expect(fakes.leases).toEqual([expect.objectContaining({ released: 'kept' })]);
  });

  it('per-call path: the settlement submits the job, and its hash stays the answer tx_hash after a retry', async () => {
    const fakes = new Fakes();
    fakes.settlements = [
      { settled: { jobId: 9n, fee: FEE, txHash: txHash(9), blockNumber: 9, promptBlobHash: '0x01' } },
    ];
    fakes.attempts = [{ outcome: failed }, { outcome: committed('answer') }];
    const events = await run(fakes, fakes.perCallCall(false));
    expect(events.map((event) => event.case)).toEqual(['retrying', 'started', 'completed']);
    expect(events.at(-1)).toMatchObject({ service: { jobId: 9n, txHash: txHash(9) } });
    expect(fakes.sent).toEqual(['settle', 'reassignJob']);
    expect(fakes.kinds()).toEqual(['PAYMENT_SETTLED', 'SUBMITTED', 'REASSIGNED', 'COMPLETED', 'ANSWERED']);
    expect(fakes.published[0]!.identity).toMatchObject({
      paymentPath: 'prepaid_debit',
      reservationId: 'pay-1',
    });
  });

  it('delegate path: a reassigned job names the reassignment as its tx_hash', async () => {
    const fakes = new Fakes();
    fakes.attempts = [{ outcome: failed }, { outcome: committed('answer') }];
    const events = await run(fakes, fakes.delegateCall(false));
    expect(events.at(-1)).toMatchObject({ case: 'completed', service: { txHash: txHash(3), sessionId: 2n } });
    expect(fakes.leases.map((lease) => lease.released)).toEqual(['discarded', 'kept']);
  });

  it('a stale pooled session is dropped and the job submitted in another', async () => {
    const fakes = new Fakes();
    fakes.submitRefusals = ['session_unusable'];
    fakes.attempts = [{ outcome: committed('answer') }];
    const events = await run(fakes, fakes.delegateCall(false));
    expect(events.at(-1)).toMatchObject({ case: 'completed', service: { sessionId: 2n } });
    expect(fakes.leases.map((lease) => lease.released)).toEqual(['discarded', 'kept']);
  });

  it('a failure after the first delta is not retried: job_failed, and the job is refunded', async () => {
    const fakes = new Fakes();
    fakes.attempts = [{ deltas: ['partial'], outcome: failed }];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({
      case: 'failed',
      jobSubmitted: true,
      error: { code: 'job_failed' },
    });
    expect(fakes.sent).toEqual(['submitJobFor', 'refundJob']);
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'FAILED', 'REFUNDED']);
  });

  it('a final that does not extend the streamed text ends stream_diverged', async () => {
    const fakes = new Fakes();
    fakes.attempts = [{ deltas: ['Hello'], outcome: committed('Goodbye') }];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({
      case: 'failed',
      jobSubmitted: true,
      error: { code: 'stream_diverged' },
    });
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'COMPLETED', 'DIVERGED']);
  });

  it('a commitment that is not the signed final is disputed and refunded', async () => {
    const fakes = new Fakes();
    const final = { sealedAnswer: new Uint8Array([1]), workerSignature: new Uint8Array([2]) } as never;
    fakes.attempts = [{ outcome: { kind: 'mismatch', final, job } }];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({ case: 'failed', error: { code: 'job_failed' } });
    expect(fakes.sent).toEqual(['submitJobFor', 'disputeMismatch']);
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'FAILED', 'DISPUTED', 'REFUNDED']);
  });

  it('per-call path: a refused settlement ends the call not submitted; an unheard one, maybe submitted', async () => {
    const refused = new Fakes();
    refused.settlements = [{ refused: new AppError('insufficient_balance') }];
    const [refusal] = await run(refused, refused.perCallCall());
    expect(refusal).toMatchObject({
      case: 'failed',
      jobSubmitted: false,
      error: { code: 'insufficient_balance' },
    });
    expect(refused.kinds()).toEqual(['FAILED']);

    const unheard = new Fakes();
    const unknown = { unknown: new AppError('unexpected_settle_error') };
    unheard.settlements = [unknown, unknown, unknown, unknown];
    const [failure] = await run(unheard, unheard.perCallCall());
    expect(failure).toMatchObject({
      case: 'failed',
      jobSubmitted: true,
      error: { code: 'unexpected_settle_error' },
    });
    expect(unheard.sent).toEqual(['settle', 'settle', 'settle', 'settle']);
  });

  it('an unexpected fault is maybe-submitted on the delegate path, not before a settlement was asked', async () => {
    const delegate = new Fakes();
    delegate.submitRefusals = [new Error('connection reset')];
    const [first] = await run(delegate, delegate.delegateCall());
    expect(first).toMatchObject({ case: 'failed', jobSubmitted: true, error: { code: 'job_failed' } });

    const perCall = new Fakes();
    perCall.options.catalogue.model = async () => {
      throw new Error('rpc down');
    };
    const [second] = await run(perCall, perCall.perCallCall());
    expect(second).toMatchObject({ case: 'failed', jobSubmitted: false, error: { code: 'job_failed' } });
  });
});
