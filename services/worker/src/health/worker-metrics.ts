import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

export interface WorkerGaugeSource {
  readonly runningJobs: number;
  readonly freeJobSlots: number;
  readonly heldSessions: number;
  readonly linkConnected: boolean;
}

/** The worker's Prometheus metrics, on a registry of its own (no global state). */
export class WorkerMetrics {
  readonly registry = new Registry();
  readonly #jobs: Counter<'outcome'>;

  constructor(source: () => WorkerGaugeSource) {
    collectDefaultMetrics({ register: this.registry });
    this.#jobs = new Counter({
      name: 'worker_jobs_total',
      help: 'Jobs handled, by outcome.',
      labelNames: ['outcome'],
      registers: [this.registry],
    });
    const gauge = (name: string, help: string, read: (state: WorkerGaugeSource) => number) =>
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          this.set(read(source()));
        },
      });
    gauge('worker_running_jobs', 'Jobs running now.', (state) => state.runningJobs);
    gauge('worker_free_job_slots', 'Jobs the worker could start now.', (state) => state.freeJobSlots);
    gauge('worker_held_sessions', 'Sessions claimed and not closed.', (state) => state.heldSessions);
    gauge('worker_link_connected', '1 while the orchestrator link is up.', (state) =>
      state.linkConnected ? 1 : 0,
    );
  }

  /** A job run ended, by its outcome (`JobOutcome`). */
  jobFinished(outcome: string): void {
    this.#jobs.inc({ outcome });
  }
}
