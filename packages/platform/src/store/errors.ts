// Store failures as typed errors, so the edge can tell "the store is down" (503, retry) from "the store
// refused this command" (a bug or corrupt data, 500) without parsing driver messages.

export abstract class StoreError extends Error {
  /** The store operation that failed, e.g. `rateWindows.hit`. */
  readonly operation: string;

  protected constructor(operation: string, message: string, options?: { cause?: unknown }) {
    super(`${operation}: ${message}`, options);
    this.operation = operation;
  }

  override get name(): string {
    return this.constructor.name;
  }
}

/** The store could not be reached or did not answer (connection refused, lost, timed out). */
export class StoreUnavailableError extends StoreError {
  constructor(operation: string, options?: { cause?: unknown }) {
    const reason = options?.cause instanceof Error ? options.cause.message : 'store unavailable';
    super(operation, reason, options);
  }
}

/** The store answered with an error (wrong type under a key, counter overflow, malformed cursor). */
export class StoreCommandError extends StoreError {
  constructor(operation: string, message: string, options?: { cause?: unknown }) {
    super(operation, message, options);
  }
}

/** The store was closed by its owner; nothing more can be done with it. */
export class StoreClosedError extends StoreError {
  constructor(operation: string) {
    super(operation, 'store is closed');
  }
}
