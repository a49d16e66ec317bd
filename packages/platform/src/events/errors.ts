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
