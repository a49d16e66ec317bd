import type { Logger } from '../logging/logger.js';

type Closer = () => Promise<void> | void;

export interface ShutdownOptions {
  logger?: Logger;
  /** Time for all closers together before the process gives up on them. */
  timeoutMs?: number;
}

/**
 * Closes what a process opened, in reverse order of opening (servers stop taking work before the stores
 * they use close), once, however many signals arrive. A failing or hanging closer does not stop the rest.
 */
export class GracefulShutdown {
  private readonly closers: Array<{ name: string; close: Closer }> = [];
  private running: Promise<boolean> | undefined;

  constructor(private readonly options: ShutdownOptions = {}) {}

  /** Registers a closer; closers run last-registered first. */
  add(name: string, close: Closer): this {
    this.closers.push({ name, close });
    return this;
  }

  get isShuttingDown(): boolean {
    return this.running !== undefined;
  }

  /** Runs every closer; resolves true when all finished cleanly within the timeout. */
  shutdown(reason: string): Promise<boolean> {
    this.running ??= this.closeAll(reason);
    return this.running;
  }

  /** Shuts down on SIGTERM / SIGINT and exits the process (code 0 when clean, 1 otherwise). */
  listen(signals: NodeJS.Signals[] = ['SIGTERM', 'SIGINT']): void {
    for (const signal of signals) {
      process.once(signal, () => {
        void this.shutdown(signal).then((clean) => process.exit(clean ? 0 : 1));
      });
    }
  }

  private async closeAll(reason: string): Promise<boolean> {
    const logger = this.options.logger;
    logger?.info({ reason }, 'shutting down');
    const deadline = Date.now() + (this.options.timeoutMs ?? 25_000);
    let clean = true;
    for (const { name, close } of [...this.closers].reverse()) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        logger?.error({ closer: name }, 'shutdown timed out before this closer ran');
        clean = false;
        continue;
      }
      let timer: NodeJS.Timeout | undefined;
      try {
        const outcome = await Promise.race([
          Promise.resolve()
            .then(close)
            .then(() => 'closed' as const),
          new Promise<'timeout'>((resolve) => {
            timer = setTimeout(() => resolve('timeout'), remaining);
          }),
        ]);
        if (outcome === 'timeout') {
          clean = false;
          logger?.error({ closer: name }, 'closer did not finish before the shutdown timeout');
        }
      } catch (error) {
        clean = false;
        logger?.error({ err: error, closer: name }, 'closer failed');
      } finally {
        clearTimeout(timer);
      }
    }
    logger?.info({ clean }, 'shutdown complete');
    return clean;
  }
}
