import { describe, expect, it } from '@jest/globals';
import { encodeBlob } from '@svc/chain';
import { AppError } from '@svc/platform';
import { JobLifecycleKind } from '../../src/events/lifecycle-events.js';
import {
  NotSubmitted,
  SubmissionReverted,
  SubmissionUnknown,
  type AnnouncedJob,
} from '../../src/completions/payment-paths/payment-path.js';
import { PerCallPath } from '../../src/completions/payment-paths/per-call-path.js';
import type { SettlementOutcome } from '../../src/completions/per-call-settlement.js';

// The per-call path against a scripted settler: what it asks (with the flag or not), what the run is
// handed at broadcast, and how `landed` ends.
const FEE = 1_000n;
const SESSION = 7n;
const JOB = (SESSION << 32n) | 1n;
const PROMPT_WIRE = new Uint8Array([9, 8, 7, 6]);
const REPLY_KEY = new Uint8Array(32).fill(1);
const EARLIER_REPLY_KEY = new Uint8Array(32).fill(2);
const TX = `0x${'ab'.repeat(32)}`;

const broadcast: SettlementOutcome = {
  broadcast: {
    jobId: JOB,
    txHash: TX,
    fee: FEE,
    signedTransaction: new Uint8Array([3, 1, 2]),
    kzgCommitment: new Uint8Array(48).fill(4),
  },
};
const settled: SettlementOutcome = {
  settled: { jobId: JOB, fee: FEE, txHash: TX, blockNumber: 12, promptBlobHash: `0x01${'cd'.repeat(31)}` },
};
const inFlight: SettlementOutcome = { unknown: new AppError('unexpected_settle_error') };

class Scripted {
  /** The settler's answers in order, each given when its promise resolves. */
  readonly answers: (SettlementOutcome | Promise<SettlementOutcome>)[] = [];
  /** Whether each ask carried `answerAtBroadcast`. */
  readonly flags: boolean[] = [];
  readonly published: JobLifecycleKind[] = [];
  readonly keys = new Map<string, Uint8Array[]>();
  readonly answeredReservations = new Set<string>();

  path(): PerCallPath {
    return new PerCallPath(
      {
        perCall: {
          settle: async (request: { answerAtBroadcast?: boolean }) => {
            this.flags.push(request.answerAtBroadcast ?? false);
            return (await this.answers.shift()) ?? inFlight;
          },
        } as never,
        lifecycle: {
          publish: async (_identity: unknown, kind: JobLifecycleKind) => {
            this.published.push(kind);
          },
        } as never,
        principal: '0x0000000000000000000000000000000000000001',
        settlementRechecksMs: [1, 1, 1],
        settlementOutcomeWaitMs: 0,
        replyKeys: {
          remember: async (reservation: string, _call: string, key: Uint8Array) => {
            this.keys.set(reservation, [...(this.keys.get(reservation) ?? []), key]);
          },
          recall: async (reservation: string) => this.keys.get(reservation) ?? [],
          markAnswered: async (reservation: string) => {
            this.answeredReservations.add(reservation);
          },
          wasAnswered: async (reservation: string) => this.answeredReservations.has(reservation),
        },
      },
      {
        paymentReservationId: 'payment-1',
        payer: '0x0000000000000000000000000000000000000002',
        amountWei: FEE,
      },
      { requestId: 'call-1', model: 'svc-deterministic:1' },
    );
  }
}

async function announced(path: PerCallPath): Promise<AnnouncedJob> {
  const submission = await path.submit(SESSION, PROMPT_WIRE, REPLY_KEY);
  if (submission === 'session_unusable') throw new Error('expected a job');
  return submission;
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => (resolve = done));
  return { promise, resolve };
}

describe('the per-call path', () => {
  it('is handed the job at broadcast, with the handover (the blob framed from the prompt, the settler’s commitment and proof); PAYMENT_SETTLED only once it landed', async () => {
    const script = new Scripted();
    const mined = deferred<SettlementOutcome>();
    script.answers.push(broadcast, inFlight, mined.promise);
    const job = await announced(script.path());

    expect(job).toMatchObject({ jobId: JOB, hash: TX, fee: FEE });
    expect(job.handover).toEqual({
      signedTransaction: new Uint8Array([3, 1, 2]),
      blob: encodeBlob(PROMPT_WIRE),
      kzgCommitment: new Uint8Array(48).fill(4),
    });
    expect(job.otherReplyKeys).toBeUndefined();
    // Asked first to answer at broadcast; the landing is asked after without it (a lost send is sent again
    // and waited for, with the same blob and job id).
    expect(script.flags[0]).toBe(true);
    expect(script.published).toEqual([]);

    mined.resolve(settled);
    await expect(job.landed).resolves.toMatchObject({ jobId: JOB, hash: TX, fee: FEE, blockNumber: 12 });
    expect(script.flags.slice(1)).toEqual([false, false]);
    expect(script.published).toEqual([JobLifecycleKind.PAYMENT_SETTLED]);
  });

  it('is announced once mined by a settler that answers settled at once (an older one, a resent payment): no handover, landed already', async () => {
    const script = new Scripted();
    script.answers.push(settled);
    const job = await announced(script.path());

    expect(job.handover).toBeUndefined();
    expect(script.published).toEqual([JobLifecycleKind.PAYMENT_SETTLED]);
    await expect(job.landed).resolves.toMatchObject({ jobId: JOB, hash: TX, blockNumber: 12 });
    expect(script.flags).toEqual([true]);
  });

  it('lands as refused when the chain refused the broadcast settlement: NotSubmitted with its code, nothing published', async () => {
    const script = new Scripted();
    script.answers.push(broadcast, inFlight, {
      refused: new AppError('invalid_prepaid_debit_payload_over_cap'),
    });
    const job = await announced(script.path());

    const failure = await job.landed.catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(NotSubmitted);
    expect(failure).not.toBeInstanceOf(SubmissionReverted);
    expect((failure as NotSubmitted).error.code).toBe('invalid_prepaid_debit_payload_over_cap');
    expect(script.published).toEqual([]);
  });

  it('lands as unknown when the outcome stays unknown past the wait: SubmissionUnknown (the payment stays held)', async () => {
    const script = new Scripted();
    script.answers.push(broadcast);
    const job = await announced(script.path());

    const failure = await job.landed.catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(SubmissionUnknown);
    expect((failure as SubmissionUnknown).error.code).toBe('unexpected_settle_error');
    // The listed rechecks are all made before it gives up.
    expect(script.flags).toEqual([true, false, false, false, false]);
    expect(script.published).toEqual([]);
  });

  it('lands as reverted when, sent again, the settlement finds its session no longer taking jobs', async () => {
    const script = new Scripted();
    script.answers.push(broadcast, inFlight, { sessionUnusable: 'SessionStateInvalid' });
    const job = await announced(script.path());

    await expect(job.landed).rejects.toBeInstanceOf(SubmissionReverted);
  });

  it('before any broadcast answers as it always did: a session that cannot take the job, a refusal', async () => {
    const unusable = new Scripted();
    unusable.answers.push({ sessionUnusable: 'WorkerNotActive' });
    expect(await unusable.path().submit(SESSION, PROMPT_WIRE, REPLY_KEY)).toBe('session_unusable');

    const refused = new Scripted();
    refused.answers.push({ refused: new AppError('insufficient_funds') });
    await expect(refused.path().submit(SESSION, PROMPT_WIRE, REPLY_KEY)).rejects.toBeInstanceOf(NotSubmitted);
    expect(refused.published).toEqual([]);
  });

  it("a resent payment is handed the earlier calls' reply keys, and once its job was answered is refused as used", async () => {
    const script = new Scripted();
    script.keys.set('payment-1', [EARLIER_REPLY_KEY]);
    script.answers.push(broadcast, settled);
    const job = await announced(script.path());
    expect(job.otherReplyKeys).toEqual([EARLIER_REPLY_KEY]);
    await expect(job.landed).resolves.toMatchObject({ otherReplyKeys: [EARLIER_REPLY_KEY] });

    script.answeredReservations.add('payment-1');
    script.answers.push(settled);
    const refusal = await script
      .path()
      .submit(SESSION, PROMPT_WIRE, REPLY_KEY)
      .catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(NotSubmitted);
    expect((refusal as NotSubmitted).error.code).toBe('invalid_prepaid_debit_payload_nonce_used');
  });
});
