import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from '@jest/globals';
import { closeClient, createClient, GrpcServer } from '../src/index.js';
import { EchoService } from './gen/svc/testing/v1/echo_pb.js';

// A server retires each client connection after its max age with a graceful GOAWAY (what the runner's
// GRPC_MAX_CONNECTION_AGE sets): the calls on it must run to their end, and new calls take a new one.

const servers: GrpcServer[] = [];
const clients: object[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) closeClient(client);
  await Promise.all(servers.splice(0).map((server) => server.shutdown(100)));
});

/** An echo server retiring connections after `maxAgeMs`, recording the connection (peer) of every call. */
async function retiringServer(maxAgeMs: number) {
  const peers = new Map<string, string>();
  const server = new GrpcServer({ channelOptions: { 'grpc.max_connection_age_ms': maxAgeMs } }).add(
    EchoService,
    {
      echo(request, context) {
        peers.set(request.text, context.peer);
        return Promise.resolve({ text: request.text });
      },
      async *echoServerStream(request, context) {
        peers.set(request.text, context.peer);
        for (let index = 0; index < request.repeat; index++) {
          await sleep(request.delayMs, undefined, { signal: context.signal });
          yield { text: request.text, index };
        }
      },
      echoClientStream: () => Promise.resolve({}),
      async *echoBidi() {},
    },
  );
  servers.push(server);
  return { port: await server.listen('127.0.0.1:0'), peers };
}

describe('a connection the server retires (max connection age)', () => {
  it('lets a stream longer than the age run to its end, and sends new calls on a new connection', async () => {
    const { port, peers } = await retiringServer(300);
    // Balanced as between services, with keepalive pings every 100 ms (30 s by default) so that pings go
    // out on the retired connection while the stream still runs on it.
    const client = createClient(EchoService, `127.0.0.1:${port}`, {
      channelOptions: {
        'grpc.keepalive_time_ms': 100,
        'grpc.service_config': JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }),
      },
    });
    clients.push(client);

    const received: number[] = [];
    let ended: unknown;
    const stream = (async () => {
      for await (const message of client.echoServerStream({ text: 'long', delayMs: 100, repeat: 15 }))
        received.push(message.index);
    })().then(
      () => (ended = 'completed'),
      (error: unknown) => (ended = error),
    );
    // Six messages in, the stream is past the age (300 ms ±10%): the server sent its GOAWAY before them, on
    // the same connection, so the client has heard it.
    while (received.length < 6 && ended === undefined) await sleep(20);
    await client.echo({ text: 'after' });

    await stream;
    expect(ended).toBe('completed');
    expect(received).toEqual([...Array(15).keys()]);
    expect(peers.get('after')).toBeDefined();
    expect(peers.get('after')).not.toBe(peers.get('long'));
  });
});
