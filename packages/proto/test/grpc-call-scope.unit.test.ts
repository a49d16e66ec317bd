import { AsyncLocalStorage } from 'node:async_hooks';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from '@svc/testkit';
import {
  closeClient,
  createClient,
  GrpcServer,
  GrpcStatus,
  RpcError,
  type ServiceClient,
} from '../src/index.js';
import { EchoService } from './gen/svc/testing/v1/echo_pb.js';

// `openCallScope` opens a scope per call (a trace span): the handler runs in it, every step of a streamed
// answer too (a generator's body runs on each `next()`, after the handler returned), and the scope hears
// the status the caller got.

type EchoClient = ServiceClient<(typeof EchoService)['method']>;

const scopeOfCall = new AsyncLocalStorage<string>();
const ended: string[] = [];
/** The scope each step of the handlers ran in. */
const seen: Array<string | undefined> = [];
let server: GrpcServer;
let client: EchoClient;

beforeAll(async () => {
  server = new GrpcServer({
    openCallScope: (context) => {
      const name = `${context.method.name} ${context.requestId}`;
      return {
        run: (handler) => scopeOfCall.run(name, handler),
        end: (code) => ended.push(`${name} ${GrpcStatus[code]}`),
      };
    },
  }).add(EchoService, {
    async echo(request) {
      seen.push(scopeOfCall.getStore());
      if (request.failWithCode) throw new RpcError(GrpcStatus.FAILED_PRECONDITION, 'refused', 'refused');
      return { text: request.text };
    },
    async *echoServerStream(request) {
      for (let index = 0; index < request.repeat; index++) {
        await new Promise((resolve) => setTimeout(resolve, 5));
        seen.push(scopeOfCall.getStore());
        yield { text: request.text, index };
      }
    },
    async echoClientStream() {
      return { text: '' };
    },
    async *echoBidi() {},
  });
  client = createClient(EchoService, `127.0.0.1:${await server.listen('127.0.0.1:0')}`);
});

afterAll(async () => {
  closeClient(client);
  await server.shutdown(100);
});

describe('openCallScope', () => {
  it('runs a unary handler in the scope of its call, and ends the scope with the status', async () => {
    seen.length = 0;
    await client.echo({ text: 'hi' }, { requestId: 'unary-ok' });
    await expect(
      client.echo({ text: 'hi', failWithCode: 'x' }, { requestId: 'unary-refused' }),
    ).rejects.toThrow('refused');
    expect(seen).toEqual(['Echo unary-ok', 'Echo unary-refused']);
    await waitFor(() => (ended.length >= 2 ? true : undefined), { what: 'both scopes ended' });
    expect(ended).toEqual(['Echo unary-ok OK', 'Echo unary-refused FAILED_PRECONDITION']);
  });

  it('runs every step of a streamed answer in the scope of its call', async () => {
    seen.length = 0;
    ended.length = 0;
    const answers = [];
    for await (const answer of client.echoServerStream({ text: 'hi', repeat: 3 }, { requestId: 'stream' }))
      answers.push(answer);
    expect(answers).toHaveLength(3);
    expect(seen).toEqual(['EchoServerStream stream', 'EchoServerStream stream', 'EchoServerStream stream']);
    await waitFor(() => (ended.length >= 1 ? true : undefined), { what: 'the scope ended' });
    expect(ended).toEqual(['EchoServerStream stream OK']);
  });
});
