// Typed failures of the event bus, so a caller can tell "this event is malformed" (a bug: fix the
// producer) from "the bus is shut down" (the process is stopping) without parsing messages.

export abstract class EventBusError extends Error {
  override get name(): string {
    return this.constructor.name;
  }
}

/** An event cannot be published or read: wrong message type, empty key or id, unparsable record. */
export class InvalidEventError extends EventBusError {
  constructor(
    readonly topic: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super(`${topic}: ${reason}`, options);
  }
}

/** The bus (or the subscription) was closed by its owner; nothing more can be published or subscribed. */
export class EventBusClosedError extends EventBusError {
  constructor(operation: string) {
    super(`${operation}: event bus is closed`);
  }
}

/**
 * The broker did not acknowledge a publish within the bus's publish timeout (unreachable, no leader,
 * too few in-sync replicas). The outcome is unknown: the events may still land, so a caller that
 * publishes again may duplicate them (consumers are idempotent), never lose them.
 */
export class PublishTimeoutError extends EventBusError {
  constructor(
    readonly topic: string,
    readonly timeoutMs: number,
    readonly events: number,
    options?: { cause?: unknown },
  ) {
    super(
      `${topic}: the broker did not acknowledge ${events === 1 ? 'the event' : `${events} events`} within ${timeoutMs} ms`,
      options,
    );
  }
}
