import type { Redis } from 'ioredis';
import { StoreClosedError, StoreCommandError, StoreError, StoreUnavailableError } from '../errors.js';
import { serverConnections, type RedisClient } from './redis-connection.js';

type ScriptArgument = string | number | Buffer;
type ScriptFunction = (...args: ScriptArgument[]) => Promise<unknown>;

/** A Lua script run atomically by Redis; its name is the ioredis command it is defined as. */
export interface LuaScript {
  readonly name: string;
  readonly lua: string;
  readonly keys: number;
}

/**
 * Server time in milliseconds, computed inside a script: every window and expiry uses the Redis clock,
 * never the replica's. Scripts prepend this (effects replication makes TIME safe before writes).
 */
export const LUA_NOW_MS = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`;

export interface RedisCommandRunnerOptions {
  /** Hold the connection's writes to the end of the event loop's turn, so they leave in one (default false). */
  readonly coalesceWrites?: boolean;
}

/**
 * The store's view of one ioredis client, of a server or a cluster: runs commands and scripts, and turns
 * every driver failure into a typed StoreError naming the operation. Scripts are defined lazily with
 * `defineCommand`, which sends EVALSHA and falls back to EVAL after a server restart or SCRIPT FLUSH.
 */
export class RedisCommandRunner {
  #closed = false;
  readonly #coalesceWrites: boolean;
  /** Whether writes are held until the end of this turn of the event loop. */
  #holding = false;

  constructor(
    readonly client: RedisClient,
    options: RedisCommandRunnerOptions = {},
  ) {
    this.#coalesceWrites = options.coalesceWrites ?? false;
  }

  get closed(): boolean {
    return this.#closed;
  }

  markClosed(): void {
    this.#closed = true;
  }

  async command<T>(operation: string, run: (client: RedisClient) => Promise<T>): Promise<T> {
    if (this.#closed) throw new StoreClosedError(operation);
    if (this.#coalesceWrites) this.#holdWrites();
    try {
      return await run(this.client);
    } catch (error) {
      throw this.toStoreError(operation, error);
    }
  }

  script(operation: string, script: LuaScript, keys: readonly string[], args: readonly ScriptArgument[]) {
    return this.command(operation, (client) => {
      if (keys.length !== script.keys) {
        throw new RangeError(`${script.name} takes ${script.keys} keys, got ${keys.length}`);
      }
      return scriptFunction(client, script)(...keys, ...args);
    });
  }

  /**
   * Corks the connection until the event loop's check phase (setImmediate), so every command written by
   * the callbacks of this turn (the checks of all the requests that arrived together) leaves in one
   * `writev`, and the server reads them in one go. ioredis still writes, queues and answers each command
   * as usual, in the order issued (EVALSHA and its fallback included); nothing waits for a reply to be
   * sent, only for the turn to end. Only a connection that is up is corked: ioredis queues commands itself
   * while it is not. On a cluster, the connection of every primary is held (a command's node is known only
   * once ioredis routes it), so each node gets the turn's commands in one write.
   */
  #holdWrites(): void {
    if (this.#holding || this.client.status !== 'ready') return;
    const held = serverConnections(this.client)
      .filter((server) => server.status === 'ready')
      .map((server) => server.stream as Redis['stream'] | undefined)
      .filter((connection) => connection !== undefined && connection.writable) as Array<Redis['stream']>;
    if (held.length === 0) return;
    for (const connection of held) connection.cork();
    this.#holding = true;
    setImmediate(() => {
      this.#holding = false;
      for (const connection of held) connection.uncork();
    });
  }

  toStoreError(operation: string, error: unknown): Error {
    if (error instanceof StoreError || error instanceof RangeError) return error;
    if (this.#closed) return new StoreClosedError(operation);
    if (error instanceof Error && error.name === 'ReplyError') {
      return new StoreCommandError(operation, error.message, { cause: error });
    }
    return new StoreUnavailableError(operation, { cause: error });
  }
}

function scriptFunction(client: RedisClient, script: LuaScript): ScriptFunction {
  // defineCommand adds a method named after the script; ioredis cannot type methods added at run time.
  const methods = client as unknown as Record<string, ScriptFunction | undefined>;
  if (methods[script.name] === undefined) {
    // Not flagged readOnly: that would let a cluster client read leases or presence from a lagging replica.
    client.defineCommand(script.name, { lua: script.lua, numberOfKeys: script.keys });
  }
  const method = methods[script.name];
  if (method === undefined) throw new Error(`ioredis did not define ${script.name}`);
  return method.bind(client);
}

/** Lua returns integers for numbers; anything else means the script and this code disagree. */
export function integerAt(reply: unknown, index: number): number {
  const value = Array.isArray(reply) ? (reply[index] as unknown) : undefined;
  if (typeof value !== 'number') throw new TypeError(`unexpected script reply ${JSON.stringify(reply)}`);
  return value;
}

export function stringAt(reply: unknown, index: number): string {
  const value = Array.isArray(reply) ? (reply[index] as unknown) : undefined;
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  throw new TypeError(`unexpected script reply ${JSON.stringify(reply)}`);
}
