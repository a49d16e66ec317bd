import { gaugesOfOneRead } from '@svc/runtime';
import { Counter, Histogram, Registry } from 'prom-client';

/** How a completion call ended: answered; refused before anything was submitted; failed after. */
export type CallOutcome = 'answered' | 'refused' | 'failed';

/** One call as its metrics follow it. */
export interface ObservedCall {
  /** Its first output reached the gateway. */
  firstOutput(): void;
  ended(outcome: CallOutcome, code?: string): void;
}

/** What the job keeper did to a tracked job or session. */
export type KeeperAction = 'timeout' | 'refund' | 'release' | 'close_session';
/** How a keeper round went: led (this replica holds the leader lock), not_leader, or failed. */
export type KeeperRound = 'led' | 'not_leader' | 'failed';

/** The job lifecycle outbox (shared by every replica), read at each scrape. */
export interface LifecycleOutboxReader {
  /** Events in it. */
  events(): Promise<number>;
  /** Age of its oldest event in seconds, 0 when empty; undefined when the head cannot be read. */
  oldestAgeSeconds(): Promise<number | undefined>;
}

/**
 * The job-orchestrator's Prometheus metrics, on the registry given (the process's, which the runner
 * serves; no global state) or one of their own. Names start with `svc_job_orchestrator_`: in the
 * all-in-one process every service shares one registry.
 */
export class JobOrchestratorMetrics {
  readonly #completions: Counter<'outcome' | 'code'>;
  readonly #firstToken: Histogram;
  readonly #completionSeconds: Histogram<'outcome'>;
  readonly #transactions: Counter<'method' | 'outcome'>;
  readonly #keeperActions: Counter<'action' | 'outcome'>;
  readonly #keeperRounds: Counter<'result'>;

  constructor(
    readonly registry: Registry = new Registry(),
    /** Workers heartbeating now on any replica, read at each scrape. */
    liveWorkers?: () => Promise<readonly { readonly freeJobSlots: number }[]>,
    /** The lifecycle outbox, read at each scrape, so a stalled relay shows as a growing age. */
    outbox?: LifecycleOutboxReader,
  ) {
    const registers = [registry];
    this.#completions = new Counter({
      name: 'svc_job_orchestrator_completions_total',
      help: 'Completion calls (RunCompletion) by outcome: answered; refused with its error code (nothing was submitted: payment, capacity, fees); failed with its error code (a job was submitted and did not answer).',
      labelNames: ['outcome', 'code'],
      registers,
    });
    this.#firstToken = new Histogram({
      name: 'svc_job_orchestrator_time_to_first_token_seconds',
      help: 'From the call to its first output reaching the gateway: payment check, session, submission, the worker’s first chunk.',
      buckets: [0.25, 0.5, 1, 2, 3, 5, 8, 13, 20, 30, 60],
      registers,
    });
    this.#completionSeconds = new Histogram({
      name: 'svc_job_orchestrator_completion_seconds',
      help: 'From the call to its end, by outcome (answered, refused, failed).',
      labelNames: ['outcome'],
      buckets: [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600],
      registers,
    });
    this.#transactions = new Counter({
      name: 'svc_job_orchestrator_chain_transactions_total',
      help: 'JobRegistry writes by method (submitJobFor: a job submitted on chain; reassignJob, openSession, timeoutJob, refundJob, releaseJobs, closeSession, disputeMismatch) and outcome: mined, refused (nothing sent: a revert in simulation, the blob fee above its maximum), failed.',
      labelNames: ['method', 'outcome'],
      registers,
    });
    this.#keeperActions = new Counter({
      name: 'svc_job_orchestrator_keeper_actions_total',
      help: 'What the job keeper did, by action (timeout, refund, release, close_session) and outcome (done, failed).',
      labelNames: ['action', 'outcome'],
      registers,
    });
    this.#keeperRounds = new Counter({
      name: 'svc_job_orchestrator_keeper_rounds_total',
      help: 'Job keeper rounds by result: led (this replica leads and ran it), not_leader, failed (tried again next round).',
      labelNames: ['result'],
      registers,
    });
    if (outbox)
      gaugesOfOneRead(registry, async () => {
        const [events, oldestAgeSeconds] = await Promise.all([outbox.events(), outbox.oldestAgeSeconds()]);
        return { events, oldestAgeSeconds };
      }, [
        {
          name: 'svc_job_orchestrator_lifecycle_outbox_events',
          help: 'Job lifecycle events recorded in the outbox and not yet published to the bus (deployment-wide: every replica reports the same queue).',
          value: (read) => read.events,
        },
        {
          name: 'svc_job_orchestrator_lifecycle_outbox_oldest_event_age_seconds',
          help: 'Age of the oldest job lifecycle event in the outbox, by its occurred_at (0 when empty): grows while the relay cannot publish.',
          value: (read) => read.oldestAgeSeconds,
        },
      ]);
    if (liveWorkers)
      gaugesOfOneRead(registry, liveWorkers, [
        {
          name: 'svc_job_orchestrator_linked_workers',
          help: 'Workers linked and heartbeating now, on any replica (every replica reports the same deployment-wide count).',
          value: (workers) => workers.length,
        },
        {
          name: 'svc_job_orchestrator_worker_free_job_slots',
          help: 'Jobs the linked workers could start now, summed over them (deployment-wide).',
          value: (workers) => workers.reduce((sum, worker) => sum + worker.freeJobSlots, 0),
        },
      ]);
  }

  /** Follows one call from now: its first output, and how and when it ended. */
  callStarted(): ObservedCall {
    const started = performance.now();
    const seconds = () => (performance.now() - started) / 1000;
    return {
      firstOutput: () => this.#firstToken.observe(seconds()),
      ended: (outcome, code) => {
        this.#completions.inc(code === undefined ? { outcome } : { outcome, code });
        this.#completionSeconds.observe({ outcome }, seconds());
      },
    };
  }

  transactionSent(method: string, outcome: 'mined' | 'refused' | 'failed'): void {
    this.#transactions.inc({ method, outcome });
  }

  keeperActed(action: KeeperAction, outcome: 'done' | 'failed', count = 1): void {
    this.#keeperActions.inc({ action, outcome }, count);
  }

  keeperRound(result: KeeperRound): void {
    this.#keeperRounds.inc({ result });
  }
}
