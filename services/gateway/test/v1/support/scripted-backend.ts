import { setTimeout as sleep } from 'node:timers/promises';
import { AppError } from '@svc/platform';
import type {
  CompletionBackend,
  CompletionEvent,
  CompletionRequest,
  DelegatePayment,
  ServiceInfo,
  ModelListing,
  PaymentChain,
  PrepaidDebitPayment,
} from '../../../src/v1/completion-backend.js';

export const FEE_WEI = 1_000n;
export const CHARGED_WEI = 900n;

export const CHAIN: PaymentChain = {
  chainId: 31337,
  jobRegistry: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
  delegate: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
};

export const JOB: ServiceInfo = {
  jobId: '42',
  sessionId: '7',
  txHash: `0x${'ab'.repeat(32)}`,
  worker: `0x${'11'.repeat(20)}`,
  droppedMessages: 2,
};

/** How a model scripted with `scriptFailure` fails, as its only event. */
export interface ScriptedFailure {
  /** Built per call, so each call fails with an error of its own. */
  readonly error: () => AppError;
  readonly jobSubmitted: boolean;
}

/** The delegate payment of a recorded request; throws for any other. */
export function delegatePaymentOf(request: CompletionRequest | undefined): DelegatePayment {
  if (request?.payment.case !== 'delegate') throw new Error('not a delegate call');
  return request.payment;
}

/** The per-call payment of a recorded request; throws for any other. */
export function prepaidDebitPaymentOf(request: CompletionRequest | undefined): PrepaidDebitPayment {
  if (request?.payment.case !== 'prepaidDebit') throw new Error('not a call paid per call');
  return request.payment;
}

/**
 * A completion backend of our own port, scripted by model name, standing in for the job-orchestrator:
 * - `echo:1b` answers "echo: <last user message>" in three deltas;
 * - `fail-before` throws `job_failed` before any event (which says nothing about submission);
 * - `no-worker` fails with `no_worker_available` first, saying no job was submitted;
 * - `fail-after` / `diverge` start, send one delta, then fail with `job_failed` / `stream_diverged`;
 * - `slow-start` sends its job at once but reports `started` only after 300 ms (a block on a real chain),
 *   then answers like `echo:1b`;
 * - `cancellable` waits, and once the client left says no job was submitted (it had not been sent yet);
 * - `hold` starts, sends one delta, then waits until `releaseHeld()` or the client leaves;
 * - a model given to `scriptFailure` fails as scripted, before any other event.
 * Every request is recorded, with the payment it carried.
 */
export class ScriptedBackend implements CompletionBackend {
  readonly requests: CompletionRequest[] = [];
  /** Call ids whose abort signal fired. */
  readonly aborted: string[] = [];
  /** Call ids of `hold` calls waiting for `releaseHeld()` right now. */
  readonly holding = new Set<string>();
  readonly #failures = new Map<string, ScriptedFailure>();
  #releaseHeld: (() => void) | undefined;
  #held = new Promise<void>((resolve) => (this.#releaseHeld = resolve));

  async listModels(): Promise<readonly ModelListing[]> {
    return [{ id: 'echo:1b', created: 1_700_000_000, ownedBy: 'worker-pool' }, { id: 'hold' }];
  }

  async describeChain(): Promise<PaymentChain> {
    return CHAIN;
  }

  async quoteFee(model: string): Promise<bigint> {
    if (model === 'missing') throw new AppError('model_not_found');
    return FEE_WEI;
  }

  /** Makes every call naming `model` fail with `failure`. */
  scriptFailure(model: string, failure: ScriptedFailure): void {
    this.#failures.set(model, failure);
  }

  releaseHeld(): void {
    this.#releaseHeld?.();
    this.#held = new Promise<void>((resolve) => (this.#releaseHeld = resolve));
  }

  async *runCompletion(request: CompletionRequest, signal: AbortSignal): AsyncIterable<CompletionEvent> {
    this.requests.push(request);
    signal.addEventListener('abort', () => this.aborted.push(request.callId), { once: true });
    const started: CompletionEvent = { case: 'started', service: JOB, feeWei: FEE_WEI };
    const failure = this.#failures.get(request.model);
    if (failure !== undefined) {
      yield { case: 'failed', error: failure.error(), jobSubmitted: failure.jobSubmitted };
      return;
    }
    switch (request.model) {
      case 'fail-before':
        throw new AppError('job_failed', { message: 'The worker failed twice.' });
      case 'no-worker':
        yield { case: 'failed', error: new AppError('no_worker_available'), jobSubmitted: false };
        return;
      case 'fail-after':
      case 'diverge':
        yield started;
        yield { case: 'delta', text: 'partial ' };
        yield {
          case: 'failed',
          error: new AppError(request.model === 'diverge' ? 'stream_diverged' : 'job_failed'),
          jobSubmitted: true,
        };
        return;
      case 'hold': {
        yield started;
        yield { case: 'delta', text: 'held ' };
        // Deliberately deaf to the signal: the gateway must not depend on a backend honouring it.
        this.holding.add(request.callId);
        await this.#held;
        this.holding.delete(request.callId);
        yield { case: 'completed', text: 'held answer', service: JOB, chargedWei: CHARGED_WEI };
        return;
      }
      case 'cancellable':
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        // The backend finds out a little after the client left, as a gRPC stream would.
        await sleep(50);
        yield { case: 'failed', error: new AppError('job_failed'), jobSubmitted: false };
        return;
      case 'slow-start':
        await sleep(300);
        yield started;
        yield { case: 'completed', text: 'slow answer', service: JOB, chargedWei: CHARGED_WEI };
        return;
      default: {
        const text = `echo: ${request.messages.at(-1)?.content ?? ''}`;
        yield started;
        for (const piece of [text.slice(0, 3), text.slice(3, 6), text.slice(6)])
          yield { case: 'delta', text: piece };
        yield { case: 'completed', text, service: JOB, chargedWei: CHARGED_WEI };
      }
    }
  }
}
