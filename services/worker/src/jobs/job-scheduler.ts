import type { Logger } from '@svc/platform';
import type { JobRefusalReason } from './job-refusal.js';
import type { JobAssignment, JobOutcome } from './job-runner.js';

export interface JobSchedulerOptions {
  /**
   * Runs one job to its outcome, calling `answered` once it no longer needs the model (its answer made, or
   * none to make): its slot then goes to the next job while the answer's commitment is mined.
   */
  readonly run: (assignment: JobAssignment, signal: AbortSignal, answered: () => void) => Promise<JobOutcome>;
  /** Gives up a job the worker cannot take (failJob at once). */
  readonly refuse: (assignment: JobAssignment, reason: JobRefusalReason) => Promise<void>;
  /** Concurrent jobs (announced in heartbeats as free job slots). */
  readonly capacity: number;
  /** Jobs that may wait for a slot; beyond that a job is refused. Default: `capacity`. */
  readonly maxWaiting?: number;
  readonly logger: Logger;
}

/**
 * Runs up to `capacity` jobs at once. A burst beyond that (jobs land between two heartbeats) waits
 * for a slot in a short queue, and the runner's deadline guard fails one that waited too long; a job
 * that finds the queue full too is failed at once, so the service can reassign it while it is young.
 */
export class JobScheduler {
  readonly #options: JobSchedulerOptions;
  readonly #running = new Map<bigint, Promise<void>>();
  /**
   * Jobs being refused (a failJob on its way). A second announcement of one (the service's hint and the
   * chain's log both announce each job) joins the refusal: started meanwhile, it would answer a job that
   * is about to fail, and its caller would be given an answer that is then refunded.
   */
  readonly #refusing = new Map<bigint, Promise<void>>();
  readonly #sessionsInUse = new Map<bigint, number>();
  readonly #abort = new AbortController();
  readonly #waiting: (() => void)[] = [];
  #active = 0;
  #draining = false;

  constructor(options: JobSchedulerOptions) {
    if (!Number.isInteger(options.capacity) || options.capacity < 1)
      throw new RangeError('capacity must be 1 or more');
    this.#options = options;
  }

  /** Slots no job holds or waits for (a job committing its answer holds none). */
  get freeJobSlots(): number {
    return this.#draining ? 0 : Math.max(this.#options.capacity - this.#wantingSlots(), 0);
  }

  get runningJobs(): number {
    return this.#active;
  }

  /** Whether a job of this session is running (its key must outlive the session's close until then). */
  usesSession(sessionId: bigint): boolean {
    return (this.#sessionsInUse.get(sessionId) ?? 0) > 0;
  }

  /** Starts the job, or refuses it; resolves when it reached its outcome. */
  submit(assignment: JobAssignment, sessionId: bigint): Promise<void> {
    const already = this.#running.get(assignment.jobId) ?? this.#refusing.get(assignment.jobId);
    if (already) return already;
    const maxWaiting = this.#options.maxWaiting ?? this.#options.capacity;
    const full = this.#wantingSlots() >= this.#options.capacity + maxWaiting;
    if (this.#draining || full) {
      const refusing = this.#guard(assignment, () =>
        this.#options.refuse(assignment, this.#draining ? 'draining' : 'no_free_slot'),
      ).finally(() => this.#refusing.delete(assignment.jobId));
      this.#refusing.set(assignment.jobId, refusing);
      return refusing;
    }
    this.#sessionsInUse.set(sessionId, (this.#sessionsInUse.get(sessionId) ?? 0) + 1);
    const running = this.#guard(assignment, async () => {
      await this.#slot();
      let holdsSlot = true;
      const freeSlot = () => {
        if (!holdsSlot) return;
        holdsSlot = false;
        this.#releaseSlot();
      };
      let outcome;
      try {
        outcome = await this.#options.run(assignment, this.#abort.signal, freeSlot);
      } finally {
        freeSlot();
      }
      this.#options.logger.info({ jobId: assignment.jobId.toString(), outcome }, 'job finished');
    }).finally(() => {
      this.#running.delete(assignment.jobId);
      const left = (this.#sessionsInUse.get(sessionId) ?? 1) - 1;
      if (left > 0) this.#sessionsInUse.set(sessionId, left);
      else this.#sessionsInUse.delete(sessionId);
    });
    this.#running.set(assignment.jobId, running);
    return running;
  }

  /** Takes no new job and waits for the running ones (graceful drain). */
  async drain(): Promise<void> {
    this.#draining = true;
    await Promise.all([...this.#running.values(), ...this.#refusing.values()]);
  }

  /** Stops the running jobs now (their model generation is aborted and they are failed). */
  async abort(): Promise<void> {
    this.#draining = true;
    this.#abort.abort(new Error('the worker is stopping'));
    await Promise.all(this.#running.values());
  }

  /** Resolves once a slot is free; the slot is this job's until it ends. */
  async #slot(): Promise<void> {
    if (this.#active < this.#options.capacity) {
      this.#active += 1;
      return;
    }
    // The slot is handed over by the job that ends, so no newcomer can slip in between.
    await new Promise<void>((resolve) => this.#waiting.push(resolve));
  }

  /** Jobs holding a slot or queued for one. */
  #wantingSlots(): number {
    return this.#active + this.#waiting.length;
  }

  #releaseSlot(): void {
    const next = this.#waiting.shift();
    if (next) next();
    else this.#active -= 1;
  }

  async #guard(assignment: JobAssignment, work: () => Promise<void>): Promise<void> {
    try {
      await work();
    } catch (error) {
      // One job's trouble (an RPC outage, say) must never take the worker down.
      this.#options.logger.error(
        { jobId: assignment.jobId.toString(), err: error },
        'job could not be handled',
      );
    }
  }
}
