import type { Logger } from '@svc/platform';

/**
 * Runs `work` every `intervalMs` (and at once when woken), never two runs at a time; `stop` waits for a
 * run in progress. A failing run is logged and the next one comes on schedule.
 */
export class PeriodicTask {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #rerun = false;
  #stopped = true;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly work: () => Promise<void>,
    private readonly logger: Logger,
  ) {}

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule();
  }

  /** Runs as soon as possible (after the run in progress, if any), e.g. right after a change to publish. */
  wake(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#rerun = true;
      return;
    }
    clearTimeout(this.#timer);
    void this.#run();
  }

  /** Runs once now, outside the schedule; resolves when that run (or the one in progress) ends. */
  async runOnce(): Promise<void> {
    if (this.#running) await this.#running;
    await this.#run();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#running;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => void this.#run(), this.intervalMs);
    this.#timer.unref();
  }

  #run(): Promise<void> {
    if (this.#running) return this.#running;
    this.#running = (async () => {
      try {
        do {
          this.#rerun = false;
          await this.work();
        } while (this.#rerun && !this.#stopped);
      } catch (error) {
        this.logger.error({ err: error, task: this.name }, 'background task failed; retrying on schedule');
      } finally {
        this.#running = undefined;
        clearTimeout(this.#timer);
        this.#schedule();
      }
    })();
    return this.#running;
  }
}
