import { createECDH } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { ContractRevertError, JobState, TransactionRevertedError, blobSidecarOf } from '@svc/chain';
import { AppError, createLogger, MemoryStore } from '@svc/platform';
import { jobRegistryInterface } from '@svc/contracts';
import { JobLifecycleKind } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import type { AttemptOutcome, AttemptToRelay } from '../../src/completions/answer-relay.js';
import { ReplyKeyEscrow } from '../../src/completions/reply-key-escrow.js';
import {
  CompletionRunner,
  type CompletionCall,
  type CompletionEvent,
  type CompletionRunnerOptions,
} from '../../src/completions/completion-runner.js';
import { DelegatePath } from '../../src/completions/payment-paths/delegate-path.js';
import { PerCallPath } from '../../src/completions/payment-paths/per-call-path.js';
import { UnconfirmedFees } from '../../src/completions/payment-paths/unconfirmed-fees.js';
import { SubmissionOutcomeUnknownError, type BeforeSigning } from '../../src/chain/service-chain.js';
import type { SettlementOutcome } from '../../src/completions/per-call-settlement.js';
import type { CallIdentity, LifecycleStep } from '../../src/events/lifecycle-events.js';
import type { PromptPlace } from '../../src/keeper/pending-submissions.js';
import { WaitingCalls } from '../../src/completions/waiting-calls.js';
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

type Relayed = { deltas?: string[]; outcome: AttemptOutcome; heldUntil?: Promise<void> };

/** Fakes of every port, scripted per test: the relay's attempts and the settler's answers. */
class Fakes {
  readonly published: { kind: string; step: LifecycleStep; identity: CallIdentity }[] = [];
  readonly leases: { sessionId: bigint; worker: string; released?: 'kept' | 'discarded' }[] = [];
  readonly sent: string[] = [];
  /** What the run did to the job's tracking and when it signed, in order. */
  readonly steps: string[] = [];
  attempts: Relayed[] = [];
  settlements: SettlementOutcome[] = [];
  submitRefusals: ('session_unusable' | Error)[] = [];
  #nextSession = 1n;

  readonly chain = {
    principal: PRINCIPAL,
    jobRegistry: '0x00000000000000000000000000000000000000dd',
    reads: {
      delegatePosition: async () => ({ authorized: true, balance: 10n ** 18n, allowance: 10n ** 18n }),
      // What a refusal's `accepts` entry encodes its `depositAndAuthorize` with.
      jobRegistry: { interface: jobRegistryInterface },
      parameters: async () => ({ maxAttempts: 2 }),
      getJob: async () => ({ state: JobState.Failed, fee: FEE }),
    },
    submitJobFor: async (
      _payer: string,
      _sessionId: bigint,
      _maxFee: bigint,
      _promptWire: Uint8Array,
      beforeSigning?: BeforeSigning,
    ) => {
      const refusal = this.submitRefusals.shift();
      if (refusal === 'session_unusable')
        throw new ContractRevertError(
          { name: 'SessionStateInvalid', args: { sessionId: 1n, state: 3n } } as never,
          undefined,
        );
      const lostOrReverted =
        refusal instanceof TransactionRevertedError || refusal instanceof SubmissionOutcomeUnknownError;
      // A refusal in simulation signs nothing; the caller is told the job's id before anything is signed.
      if (refusal && !lostOrReverted) throw refusal;
      await beforeSigning?.(1n);
      this.steps.push('signed');
      const broadcast = { jobId: 1n, hash: txHash(1), blob: blobSidecarOf(new Uint8Array([1])) };
      // A revert when mined and a send lost after its broadcast come after the submission was announced.
      if (lostOrReverted) return { ...broadcast, landed: Promise.reject(refusal) };
      this.sent.push('submitJobFor');
      const tx = { hash: txHash(1), blockNumber: 1, events: [] };
      return { ...broadcast, landed: Promise.resolve({ jobId: 1n, fee: FEE, tx }) };
    },
    timeoutJob: async () => this.#tx('timeoutJob', 2),
    reassignJob: async () => this.#tx('reassignJob', 3),
    refundJob: async () => this.#tx('refundJob', 4),
    disputeMismatch: async (...args: unknown[]) => {
      this.disputes.push(args);
      return this.#tx('disputeMismatch', 5);
    },
    refundUndelivered: async () => {
      if (this.refundUndeliveredFails) throw new Error('rpc down');
      return this.#tx('refundUndelivered', 6);
    },
  };
  refundUndeliveredFails = false;
  /** The arguments of each `disputeMismatch` sent. */
  disputes: unknown[][] = [];
  readonly markedUndelivered: bigint[] = [];

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
      handovers: { record: async () => undefined },
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
            jobSubmitted: async () => undefined,
          } as never;
        },
      },
      relay: {
        follow: async (attempt, onDelta) => {
          this.followed.push(attempt);
          // As the relay does, a job handed over before inclusion is absent until its submission lands.
          const landing = (attempt.landing as { settled?: Promise<unknown> } | undefined)?.settled;
          if (
            landing &&
            !(await landing.then(
              () => true,
              () => false,
            )) &&
            attempt.landing?.failed
          )
            return { kind: 'unlanded', reason: 'its submission did not land' };
          const next = this.attempts.shift();
          if (!next) throw new Error('no attempt scripted');
          await next.heldUntil;
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
        track: async (jobId: bigint, _call: CallIdentity, flags?: object) =>
          void this.steps.push(
            `track ${jobId}${flags && Object.keys(flags).length ? ` ${Object.keys(flags).join()}` : ''}`,
          ),
        holdRun: async (jobId: bigint) => {
          this.steps.push(`holdRun ${jobId}`);
          return { end: async () => void this.steps.push(`end ${jobId}`) };
        },
        forget: async (jobId: bigint) => void this.steps.push(`forget ${jobId}`),
        markUndelivered: async (jobId: bigint) => void this.markedUndelivered.push(jobId),
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
      waiting: new WaitingCalls(),
      logger,
    };
  }

  get runner(): CompletionRunner {
    return new CompletionRunner(this.options);
  }

  /** How long a per-call call waits for an unknown settlement (beyond its three quick rechecks). */
  settlementWaitMs = 0;

  /** Every attempt the relay was asked to follow. */
  readonly followed: AttemptToRelay[] = [];
  /** Reply keys by payment, when a test keeps them. */
  replyKeys: ReplyKeyEscrow | undefined;
  requestId = 'req-1';

  /** Submissions left for the keeper to adopt if they land. */
  readonly expected: { prompt: PromptPlace; call: CallIdentity }[] = [];

  /** The wallets' fees of submissions not yet mined (shared by the calls of one test). */
  unconfirmed = new UnconfirmedFees(new MemoryStore());

  delegateCall(stream = true): CompletionCall {
    const terms = { wallet: WALLET, keyId: 'key-1', reservationId: 'res-1', maxFeeWei: 10n };
    const deps = {
      chain: this.chain as never,
      chainId: 31337n,
      pending: {
        expect: async (prompt: PromptPlace, call: CallIdentity) => void this.expected.push({ prompt, call }),
      },
      unconfirmed: this.unconfirmed,
    };
    return this.#call(new DelegatePath(deps, terms, this.#ids()), stream);
  }

  perCallCall(stream = true): CompletionCall {
    const terms = { paymentReservationId: 'pay-1', payer: WALLET, amountWei: FEE };
    const deps = {
      perCall: this.perCall as never,
      lifecycle: this.options.lifecycle,
      principal: PRINCIPAL,
      settlementRechecksMs: [1, 1, 1],
      settlementOutcomeWaitMs: this.settlementWaitMs,
      ...(this.replyKeys ? { replyKeys: this.replyKeys } : {}),
    };
    return this.#call(new PerCallPath(deps, terms, this.#ids()), stream);
  }

  kinds(): string[] {
    return this.published.map((event) => event.kind);
  }

  #ids() {
    return { requestId: this.requestId, model: MODEL };
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
  const runner = fakes.runner;
  for await (const event of runner.run(call, new AbortController().signal)) events.push(event);
  // The caller's stream may end before the run does (an answer delivered on the signed final).
  await runner.drain(5_000);
  // Events recorded after the call's end are not awaited by the run.
  await new Promise((resolve) => setImmediate(resolve));
  return events;
}

const job = { state: JobState.Completed, fee: FEE } as never;
const commitment = { responseHash: '0x01', transactionHash: '0x02', blockNumber: 1 };
const committed = (text: string): AttemptOutcome => ({ kind: 'committed', text, job });
const failed: AttemptOutcome = {
  kind: 'failed',
  reason: 'worker failed',
  job: { state: JobState.Failed, fee: FEE } as never,
};

const signed = (text: string): AttemptOutcome => ({
  kind: 'signed',
  text,
  final: { sealedAnswer: new Uint8Array([1]), workerSignature: new Uint8Array([2]) } as never,
});

describe('the completion runner on the signed final (fakes)', () => {
  it('ends the stream on a signed final that extends it, then records ANSWERED once the same final is committed', async () => {
    const fakes = new Fakes();
    let commit!: () => void;
    const heldUntil = new Promise<void>((resolve) => (commit = resolve));
    fakes.attempts = [
      { deltas: ['Hel'], outcome: signed('Hello') },
      { outcome: committed('Hello'), heldUntil },
    ];
    const events: CompletionEvent[] = [];
    const runner = fakes.runner;
    const waiting: number[] = [];
    // The caller's stream ends while the commitment is still awaited.
    for await (const event of runner.run(fakes.delegateCall(), new AbortController().signal)) {
      events.push(event);
      waiting.push(fakes.options.waiting.count);
    }
    expect(fakes.kinds()).toEqual(['SUBMITTED']);
    // The caller counts as waiting (a batch may linger for company) until it has its answer, not while
    // the run goes on for the commitment.
    expect(waiting[0]).toBe(1);
    expect(waiting.at(-1)).toBe(0);
    expect(runner.inFlight).toBe(1);
    commit();
    await runner.drain(5_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(events.map((event) => event.case)).toEqual(['started', 'delta', 'delta', 'completed']);
    expect(fakes.followed[0]!.signedBy).toMatchObject({ worker: '0xw1', sessionId: 1n, chainId: 31337n });
    expect(fakes.followed[1]!.signedBy).toBeUndefined();
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'COMPLETED', 'ANSWERED']);
    expect(fakes.leases[0]!.released).toBe('kept');
  });

  it('a signed final that does not extend the streamed text ends stream_diverged, and the committed job is refunded', async () => {
    const fakes = new Fakes();
    fakes.attempts = [{ deltas: ['Hello'], outcome: signed('Goodbye') }, { outcome: committed('Goodbye') }];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({
      case: 'failed',
      jobSubmitted: true,
      error: { code: 'stream_diverged' },
    });
    expect(fakes.sent).toEqual(['submitJobFor', 'refundUndelivered']);
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'COMPLETED', 'DIVERGED', 'REFUNDED']);
  });

  it('a worker that streamed one answer and commits another is disputed after the caller got what it signed', async () => {
    const fakes = new Fakes();
    const final = { sealedAnswer: new Uint8Array([1]), workerSignature: new Uint8Array([2]) } as never;
    fakes.attempts = [
      { deltas: ['Hel'], outcome: signed('Hello') },
      { outcome: { kind: 'mismatch', final, job, commitment } },
    ];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({ case: 'completed', text: 'Hello' });
    expect(fakes.sent).toEqual(['submitJobFor', 'disputeMismatch']);
    // No ANSWERED: the fee is not counted as spent; REFUNDED releases the hold.
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'DISPUTED', 'REFUNDED']);
  });

  it('a worker that signed a final and never commits it: the job is timed out and refunded, nothing charged', async () => {
    const fakes = new Fakes();
    const missed: AttemptOutcome = {
      kind: 'failed',
      reason: 'the job missed its deadline',
      job: { state: JobState.Submitted, fee: FEE } as never,
    };
    fakes.attempts = [{ deltas: ['Hel'], outcome: signed('Hello') }, { outcome: missed }];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({ case: 'completed', text: 'Hello' });
    expect(fakes.sent).toEqual(['submitJobFor', 'timeoutJob', 'refundJob']);
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'REFUNDED']);
  });

  it('per-call path (x402): the same fast end, the settlement named as tx_hash, ANSWERED after the commitment', async () => {
    const fakes = new Fakes();
    fakes.settlements = [
      { settled: { jobId: 9n, fee: FEE, txHash: txHash(9), blockNumber: 9, promptBlobHash: '0x01' } },
    ];
    fakes.attempts = [{ deltas: ['ans'], outcome: signed('answer') }, { outcome: committed('answer') }];
    const events = await run(fakes, fakes.perCallCall());
    expect(events.map((event) => event.case)).toEqual(['started', 'delta', 'delta', 'completed']);
    expect(events.at(-1)).toMatchObject({ service: { jobId: 9n, txHash: txHash(9) }, charged: FEE });
    expect(fakes.followed[0]!.signedBy).toMatchObject({ sessionId: 1n });
    expect(fakes.sent).toEqual(['settle']);
    expect(fakes.kinds()).toEqual(['PAYMENT_SETTLED', 'SUBMITTED', 'COMPLETED', 'ANSWERED']);
  });

  it('a final acknowledgement that fails (a chain read, a link gone) still records COMPLETED and ANSWERED, on either end', async () => {
    for (const attempts of [
      [{ deltas: ['Hel'], outcome: signed('Hello') }, { outcome: committed('Hello') }],
      [{ deltas: ['Hel'], outcome: committed('Hello') }],
    ]) {
      const fakes = new Fakes();
      fakes.options.workers.acknowledgeFinal = async () => {
        throw new Error('rpc down');
      };
      fakes.attempts = attempts;
      const events = await run(fakes, fakes.delegateCall());
      expect(events.at(-1)).toMatchObject({ case: 'completed', text: 'Hello', charged: FEE });
      expect(fakes.kinds()).toEqual(['SUBMITTED', 'COMPLETED', 'ANSWERED']);
      expect(fakes.published.at(-1)!.identity).toMatchObject({ reservationId: 'res-1' });
      expect(fakes.leases).toEqual([expect.objectContaining({ released: 'kept' })]);
    }
  });
});

describe('the session lease on every exit of a submitted job (fakes)', () => {
  it('is handed back once when the run throws, recording the job before its signing or following it after', async () => {
    const trackFails = new Fakes();
    trackFails.options.jobs.track = async () => {
      throw new Error('store down');
    };
    trackFails.attempts = [{ outcome: committed('Hello') }];
    await run(trackFails, trackFails.delegateCall());
    expect(trackFails.leases).toEqual([expect.objectContaining({ released: 'kept' })]);

    // The relay's own read fails (no attempt scripted: `follow` throws).
    const followFails = new Fakes();
    const events = await run(followFails, followFails.delegateCall());
    expect(events.at(-1)).toMatchObject({ case: 'failed', jobSubmitted: true });
    expect(followFails.leases).toEqual([expect.objectContaining({ released: 'kept' })]);
  });

  it('leaves the pool when the run throws while its submission may still land (a replica stopping under it)', async () => {
    const fakes = new Fakes();
    const blob = '0x01' + 'ab'.repeat(31);
    fakes.submitRefusals = [new SubmissionOutcomeUnknownError(1n, blob, 0, new Error('provider destroyed'))];
    fakes.options.relay.follow = async () => {
      throw new Error('provider destroyed');
    };
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({ case: 'failed', jobSubmitted: true });
    // Pooled, its next job would take the same job id as the one that may still land.
    expect(fakes.leases).toEqual([expect.objectContaining({ released: 'discarded' })]);
  });

  it('is handed back when the session is not marked as used, and the job still runs to its answer', async () => {
    const fakes = new Fakes();
    const acquire = fakes.options.sessions.acquire;
    fakes.options.sessions.acquire = async (request) => ({
      ...(await acquire(request)),
      jobSubmitted: async () => {
        throw new Error('store down');
      },
    });
    fakes.attempts = [{ deltas: ['Hel'], outcome: committed('Hello') }];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({ case: 'completed', text: 'Hello' });
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'COMPLETED', 'ANSWERED']);
    expect(fakes.leases).toEqual([expect.objectContaining({ released: 'kept' })]);
  });
});

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

  it('a final that does not extend the streamed text ends stream_diverged, and the Completed job is refunded', async () => {
    const fakes = new Fakes();
    fakes.attempts = [{ deltas: ['Hello'], outcome: committed('Goodbye') }];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({
      case: 'failed',
      jobSubmitted: true,
      error: { code: 'stream_diverged' },
    });
    // DIVERGED keeps the hold (the job is Completed on chain); the refund's REFUNDED gives it back.
    expect(fakes.sent).toEqual(['submitJobFor', 'refundUndelivered']);
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'COMPLETED', 'DIVERGED', 'REFUNDED']);
    expect(fakes.published.at(-1)!.step).toMatchObject({ jobId: 1n, feeWei: FEE, txHash: txHash(6) });
  });

  it('a committed job whose final never arrived or does not decrypt is refunded, and no event releases the hold before', async () => {
    for (const reason of ['no final', 'undecryptable']) {
      const fakes = new Fakes();
      fakes.attempts = [{ deltas: ['Hel'], outcome: { kind: 'undelivered', reason, job } }];
      const events = await run(fakes, fakes.delegateCall());
      expect(events.at(-1)).toMatchObject({
        case: 'failed',
        jobSubmitted: true,
        error: { code: 'job_failed' },
      });
      expect(fakes.sent).toEqual(['submitJobFor', 'refundUndelivered']);
      expect(fakes.kinds()).toEqual(['SUBMITTED', 'REFUNDED']);
    }
  });

  it('an undelivered job whose refund cannot be sent now is left to the keeper, the hold still held', async () => {
    const fakes = new Fakes();
    fakes.refundUndeliveredFails = true;
    fakes.attempts = [{ deltas: ['Hello'], outcome: committed('Goodbye') }];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({ case: 'failed', error: { code: 'stream_diverged' } });
    expect(fakes.markedUndelivered).toEqual([1n]);
    // Nothing that releases the hold (FAILED, REFUNDED) was published.
    expect(fakes.kinds()).toEqual(['SUBMITTED', 'COMPLETED', 'DIVERGED']);
  });

  it('a commitment that is not the signed final is disputed and refunded', async () => {
    const fakes = new Fakes();
    const final = { sealedAnswer: new Uint8Array([1]), workerSignature: new Uint8Array([2]) } as never;
    fakes.attempts = [{ outcome: { kind: 'mismatch', final, job, commitment } }];
    const events = await run(fakes, fakes.delegateCall());
    expect(events.at(-1)).toMatchObject({ case: 'failed', error: { code: 'job_failed' } });
    expect(fakes.sent).toEqual(['submitJobFor', 'disputeMismatch']);
    // The dispute names the commitment the relay read (ServiceChain reads its batch to prove it).
    expect(fakes.disputes).toEqual([[job, commitment, new Uint8Array([1]), new Uint8Array([2])]]);
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
    // Maybe submitted, so its session may have a job on its way: it leaves the pool.
    expect(delegate.leases).toEqual([expect.objectContaining({ released: 'discarded' })]);

    const perCall = new Fakes();
    perCall.options.catalogue.model = async () => {
      throw new Error('rpc down');
    };
    const [second] = await run(perCall, perCall.perCallCall());
    expect(second).toMatchObject({ case: 'failed', jobSubmitted: false, error: { code: 'job_failed' } });
  });

  it('a submission mined and reverted drops its session, counts its worker, frees the payment and publishes FAILED', async () => {
    const fakes = new Fakes();
    fakes.submitRefusals = [
      new TransactionRevertedError(PRINCIPAL, 7, txHash(7), 7, {
        name: 'SessionStateInvalid',
        args: { sessionId: 1n, state: 3n },
      } as never),
    ];
    const outcomes: (string | undefined)[] = [];
    const acquire = fakes.options.sessions.acquire;
    fakes.options.sessions.acquire = async (request) => {
      const lease = await acquire(request);
      return {
        ...lease,
        discard: async (outcome?: string) => void outcomes.push(outcome),
      } as never;
    };
    const events = await run(fakes, fakes.delegateCall());
    expect(events).toEqual([
      expect.objectContaining({
        case: 'failed',
        jobSubmitted: false,
        error: expect.objectContaining({ code: 'job_failed' }),
      }),
    ]);
    // The closed session never goes back into the pool; only its worker could close it under a checked
    // submission (the payer is no party to the service's sessions), so the worker's record counts it.
    expect(outcomes).toEqual(['failed']);
    expect(fakes.kinds()).toEqual(['FAILED']);
    // Nothing bars the wallet: its next call is served.
    const next = new Fakes();
    next.attempts = [{ outcome: committed('answer') }];
    expect((await run(next, next.delegateCall())).at(-1)).toMatchObject({ case: 'completed' });
  });

  it('per-call path: a settlement whose outcome stays unknown past the quick rechecks is waited for, and served once it lands', async () => {
    const fakes = new Fakes();
    fakes.settlementWaitMs = 5_000;
    const unknown = { unknown: new AppError('unexpected_settle_error') };
    fakes.settlements = [
      ...Array.from({ length: 8 }, () => unknown),
      { settled: { jobId: 9n, fee: FEE, txHash: txHash(9), blockNumber: 9, promptBlobHash: '0x01' } },
    ];
    fakes.attempts = [{ outcome: committed('answer') }];
    const events = await run(fakes, fakes.perCallCall(false));
    expect(events.at(-1)).toMatchObject({ case: 'completed', text: 'answer', service: { jobId: 9n } });
    expect(fakes.sent.filter((sent) => sent === 'settle')).toHaveLength(9);
  });

  it('delegate path: a submission with no known outcome (broadcast, then lost) is left to the keeper under the call, and no event frees its hold', async () => {
    const fakes = new Fakes();
    const blob = '0x01' + 'ab'.repeat(31);
    fakes.submitRefusals = [new SubmissionOutcomeUnknownError(1n, blob, 3, new Error('no receipt'))];
    const [failure] = await run(fakes, fakes.delegateCall());
    expect(failure).toMatchObject({ case: 'failed', jobSubmitted: true, error: { code: 'job_failed' } });
    expect(fakes.expected).toEqual([
      {
        prompt: expect.objectContaining({ promptBlobHash: blob, promptIndex: 3 }),
        call: expect.objectContaining({ reservationId: 'res-1', keyId: 'key-1', payer: WALLET }),
      },
    ]);
    // FAILED would give the spend hold back while the job may still land and be paid.
    expect(fakes.kinds()).toEqual([]);
    // Tracked before the signing; left tracked as an orphan (refunded once answered), its mark ended.
    expect(fakes.steps).toEqual(['track 1', 'holdRun 1', 'signed', 'track 1 orphan', 'end 1']);
  });

  it('delegate path: the job is tracked under the call and marked run before its submission is signed; the run keeps that mark', async () => {
    const fakes = new Fakes();
    fakes.attempts = [{ outcome: committed('Hello') }];
    const events = await run(fakes, fakes.delegateCall(false));
    expect(events.at(-1)).toMatchObject({ case: 'completed', text: 'Hello' });
    expect(fakes.steps).toEqual(['track 1', 'holdRun 1', 'signed', 'track 1 answered', 'end 1']);
  });

  it('delegate path: a job that cannot be recorded is not submitted, and a submission refused after its record is forgotten', async () => {
    const unrecorded = new Fakes();
    unrecorded.options.jobs.track = async () => {
      throw new Error('store down');
    };
    const [failure] = await run(unrecorded, unrecorded.delegateCall());
    expect(failure).toMatchObject({ case: 'failed', jobSubmitted: false, error: { code: 'job_failed' } });
    expect(unrecorded.steps).toEqual([]);
    expect(unrecorded.kinds()).toEqual(['FAILED']);

    // Mined and reverted (its session changed under it): nothing landed, the record goes.
    const reverted = new Fakes();
    reverted.submitRefusals = [
      new TransactionRevertedError(PRINCIPAL, 7, txHash(7), 7, {
        name: 'SessionStateInvalid',
        args: { sessionId: 1n, state: 3n },
      } as never),
    ];
    const [revertFailure] = await run(reverted, reverted.delegateCall());
    expect(revertFailure).toMatchObject({ case: 'failed', jobSubmitted: false });
    expect(reverted.steps).toEqual(['track 1', 'holdRun 1', 'signed', 'forget 1', 'end 1']);
  });

  it("per-call path: a payment resent after its first call gave up (502) is given the job it settled, read with the first call's reply key", async () => {
    const store = new MemoryStore();
    const escrow = new ReplyKeyEscrow(store, new Uint8Array(32).fill(7));
    // First call: the settlement is broadcast and its outcome stays unknown past the wait: 502.
    const first = new Fakes();
    first.replyKeys = escrow;
    const unknown = { unknown: new AppError('unexpected_settle_error') };
    first.settlements = [unknown, unknown, unknown, unknown];
    const [failure] = await run(first, first.perCallCall(false));
    expect(failure).toMatchObject({ case: 'failed', error: { code: 'unexpected_settle_error' } });
    const [firstKey] = await escrow.recall('pay-1');
    expect(firstKey).toHaveLength(32);

    // The same PAYMENT-SIGNATURE sent again: the settler hands back the settlement that landed meanwhile.
    const resend = new Fakes();
    resend.replyKeys = escrow;
    resend.requestId = 'req-2';
    resend.settlements = [
      { settled: { jobId: 9n, fee: FEE, txHash: txHash(9), blockNumber: 9, promptBlobHash: '0x01' } },
    ];
    resend.attempts = [{ outcome: committed('the first prompt answered') }];
    const events = await run(resend, resend.perCallCall(false));
    expect(events.at(-1)).toMatchObject({ case: 'completed', service: { jobId: 9n, txHash: txHash(9) } });
    expect(resend.followed).toHaveLength(1);
    expect(resend.followed[0]!.otherReplyKeys?.map((key) => Buffer.from(key).toString('hex'))).toEqual([
      Buffer.from(firstKey!).toString('hex'),
    ]);
    await store.close();
  });

  it('per-call path: the same payment sent again after its job was answered is refused as used, nothing run', async () => {
    const store = new MemoryStore();
    const escrow = new ReplyKeyEscrow(store, new Uint8Array(32).fill(7));
    const settled: SettlementOutcome = {
      settled: { jobId: 9n, fee: FEE, txHash: txHash(9), blockNumber: 9, promptBlobHash: '0x01' },
    };
    const first = new Fakes();
    first.replyKeys = escrow;
    first.settlements = [settled];
    first.attempts = [{ outcome: committed('answer') }];
    expect((await run(first, first.perCallCall(false))).at(-1)).toMatchObject({ case: 'completed' });

    const resend = new Fakes();
    resend.replyKeys = escrow;
    resend.requestId = 'req-2';
    resend.settlements = [settled];
    const events = await run(resend, resend.perCallCall(false));
    expect(events).toEqual([
      expect.objectContaining({
        case: 'failed',
        jobSubmitted: false,
        error: expect.objectContaining({ code: 'invalid_prepaid_debit_payload_nonce_used' }),
      }),
    ]);
    expect(resend.followed).toEqual([]);
    expect(resend.kinds()).toEqual(['FAILED']);
    await store.close();
  });
});

describe('fees of submissions not yet mined (fakes)', () => {
  it('a wallet whose balance covers one job has one call in flight: the next is refused until the first lands', async () => {
    const fakes = new Fakes();
    fakes.chain.reads.delegatePosition = async () => ({
      authorized: true,
      balance: FEE,
      allowance: 10n * FEE,
    });
    let land!: () => void;
    const landing = new Promise<void>((resolve) => (land = resolve));
    fakes.chain.submitJobFor = async () => {
      fakes.sent.push('submitJobFor');
      const tx = { hash: txHash(1), blockNumber: 1, events: [] };
      const landed = landing.then(() => ({ jobId: 1n, fee: FEE, tx }));
      return { jobId: 1n, hash: txHash(1), blob: blobSidecarOf(new Uint8Array([1])), landed };
    };
    // The first call's job is answered before it lands (the worker started before inclusion).
    fakes.attempts = [{ outcome: signed('answer') }, { outcome: committed('answer') }];
    const first = run(fakes, fakes.delegateCall());
    await waitUntilSent(fakes, 1);
    // The chain still shows the whole balance: only the held fee says it is spoken for.
    const [refused] = await run(fakes, fakes.delegateCall());
    expect(refused).toMatchObject({
      case: 'failed',
      jobSubmitted: false,
      error: { code: 'insufficient_balance' },
    });
    expect(fakes.sent).toEqual(['submitJobFor']);
    land();
    expect((await first).at(-1)).toMatchObject({ case: 'completed' });
    // Landed: the chain's balance tells from now on, and the hold is gone.
    expect(await fakes.unconfirmed.hold(WALLET, 0n).then((held) => held.total)).toBe(0n);
  });
});

async function waitUntilSent(fakes: Fakes, count: number): Promise<void> {
  for (let tries = 0; fakes.sent.length < count; tries++) {
    if (tries > 200) throw new Error('never submitted');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
