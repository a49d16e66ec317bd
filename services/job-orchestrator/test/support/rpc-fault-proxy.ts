import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

interface JsonRpcRequest {
  readonly id: unknown;
  readonly method: string;
}

/**
 * A JSON-RPC proxy in front of a node, for one client that should see the chain through a bad network:
 * `loseReceipts(n)` makes the next `n` receipts that exist (mined transactions) fail in transit, as a
 * connection dropped after the node answered would. Batches are forwarded whole and edited on the way back.
 */
export class RpcFaultProxy {
  #receiptsToLose = 0;
  #lost = 0;
  #outageAfterBroadcastMs = 0;
  #downUntil = 0;
  #swallowBroadcasts = false;
  #loseBroadcastAnswer = false;
  #swallowed = 0;
  #server: Server | undefined;
  #url = '';

  private constructor(private readonly upstream: string) {}

  static async start(upstream: string): Promise<RpcFaultProxy> {
    const proxy = new RpcFaultProxy(upstream);
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        if (Date.now() < proxy.#downUntil) {
          res.writeHead(503).end('injected: the node is unreachable');
          return;
        }
        void proxy.#handle(Buffer.concat(chunks).toString('utf8')).then(
          (body) => res.writeHead(200, { 'content-type': 'application/json' }).end(body),
          (error: unknown) => res.writeHead(502).end(String(error)),
        );
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxy.#server = server;
    proxy.#url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    return proxy;
  }

  get url(): string {
    return this.#url;
  }

  /** The next `count` receipts of mined transactions are lost on their way back. */
  loseReceipts(count: number): void {
    this.#receiptsToLose = count;
  }

  /**
   * The next transaction broadcast goes through, then the chain is unreachable for `durationMs`: every
   * request fails, receipts and lookups included. With `loseAnswer`, the node's answer to that broadcast is
   * lost too, so the sender cannot tell it was accepted.
   */
  outageAfterBroadcast(durationMs: number, options: { readonly loseAnswer?: boolean } = {}): void {
    this.#outageAfterBroadcastMs = durationMs;
    this.#loseBroadcastAnswer = options.loseAnswer ?? false;
  }

  /**
   * While on, every `eth_sendRawTransaction` is answered as accepted and never reaches the node: the
   * sender's transactions are never mined, however often it sends them again.
   */
  swallowBroadcasts(on: boolean): void {
    this.#swallowBroadcasts = on;
  }

  /** Broadcasts swallowed so far. */
  get swallowed(): number {
    return this.#swallowed;
  }

  /** Receipts lost so far. */
  get lost(): number {
    return this.#lost;
  }

  async close(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  #handle(body: string): Promise<string> {
    return this.#swallowBroadcasts ? this.#withoutBroadcasts(body) : this.#forward(body);
  }

  /** Answers each broadcast in `body` as accepted without sending it, and forwards the rest of the batch. */
  async #withoutBroadcasts(body: string): Promise<string> {
    const parsed = JSON.parse(body) as JsonRpcRequest | JsonRpcRequest[];
    const requests = Array.isArray(parsed) ? parsed : [parsed];
    const swallowed = requests.filter((request) => request.method === 'eth_sendRawTransaction');
    const forwarded = requests.filter((request) => request.method !== 'eth_sendRawTransaction');
    this.#swallowed += swallowed.length;
    const answers: unknown[] = swallowed.map((request) => ({
      jsonrpc: '2.0',
      id: request.id,
      result: '0x' + '00'.repeat(32),
    }));
    if (forwarded.length > 0) {
      const upstream = await this.#forward(JSON.stringify(Array.isArray(parsed) ? forwarded : forwarded[0]));
      const answered = JSON.parse(upstream) as unknown;
      answers.push(...(Array.isArray(answered) ? answered : [answered]));
    }
    return JSON.stringify(Array.isArray(parsed) ? answers : answers[0]);
  }

  async #forward(body: string): Promise<string> {
    const answer = await fetch(this.upstream, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    const text = await answer.text();
    const requests = JSON.parse(body) as JsonRpcRequest | JsonRpcRequest[];
    const broadcast = (Array.isArray(requests) ? requests : [requests]).some(
      (request) => request.method === 'eth_sendRawTransaction',
    );
    if (broadcast && this.#outageAfterBroadcastMs > 0) {
      this.#downUntil = Date.now() + this.#outageAfterBroadcastMs;
      this.#outageAfterBroadcastMs = 0;
      if (this.#loseBroadcastAnswer) {
        this.#loseBroadcastAnswer = false;
        throw new Error('injected: the connection dropped before the node answered');
      }
    }
    if (this.#receiptsToLose === 0) return text;
    const responses = JSON.parse(text) as Record<string, unknown> | Record<string, unknown>[];
    const edit = (response: Record<string, unknown>): Record<string, unknown> => {
      const request = (Array.isArray(requests) ? requests : [requests]).find((r) => r.id === response.id);
      if (request?.method !== 'eth_getTransactionReceipt' || !response.result || this.#receiptsToLose === 0)
        return response;
      this.#receiptsToLose -= 1;
      this.#lost += 1;
      return {
        jsonrpc: '2.0',
        id: response.id,
        error: { code: -32603, message: 'injected: receipt lost in transit' },
      };
    };
    return JSON.stringify(Array.isArray(responses) ? responses.map(edit) : edit(responses));
  }
}
