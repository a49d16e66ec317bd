import { Http2SubchannelConnector } from '@grpc/grpc-js/build/src/transport.js';

/**
 * Keeps calls in flight alive on a connection the server retired. A server retires a connection with a
 * graceful GOAWAY (`grpc.max_connection_age_ms`, or a draining shutdown): the calls already on it may run
 * to their end. But @grpc/grpc-js 1.14 (grpc/grpc-node#3068, open) keeps its keepalive timer running on
 * that connection; its next ping goes out on an HTTP/2 session that is closing, Node refuses it, and
 * grpc-js takes the refusal for a dead connection: every call still on it ends UNAVAILABLE
 * `Connection dropped` at once. So once a connection hears a GOAWAY, it sends no new keepalive ping; a
 * ping already sent still has its timeout, so a peer that died stays detected. New calls go on a new
 * connection as before.
 *
 * This reaches into grpc-js's transport (a pinned version): if its shape changed, nothing is patched
 * and `grpc-goaway.unit.test.ts` fails.
 */
export function stopKeepaliveAfterGoaway(): void {
  const prototype = Http2SubchannelConnector.prototype as unknown as Record<string | symbol, unknown>;
  if (prototype[PATCHED] || typeof prototype.connect !== 'function') return;
  const connect = prototype.connect as (...args: unknown[]) => Promise<unknown>;
  prototype.connect = async function (this: unknown, ...args: unknown[]) {
    const transport = (await connect.apply(this, args)) as TransportInternals;
    transport.session?.once('goaway', () => {
      // A keepalive interval of 0 or less: grpc-js neither schedules nor sends another ping.
      if (typeof transport.keepaliveTimeMs === 'number') transport.keepaliveTimeMs = -1;
    });
    return transport;
  };
  prototype[PATCHED] = true;
}

const PATCHED = Symbol.for('svc.grpc.stopKeepaliveAfterGoaway');

/** What of grpc-js's (private) Http2Transport this reads and writes. */
interface TransportInternals {
  session?: NodeJS.EventEmitter;
  keepaliveTimeMs?: number;
}
