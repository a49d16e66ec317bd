import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from '@jest/globals';
import {
  createLogger,
  createServiceGrpcServer,
  generateServiceTokenKeyPair,
  serviceClientOptions,
  ServiceIdentity,
} from '@svc/platform';
import { closeClient, createClient, waitForClientReady, type GrpcServer, type ServiceImpl } from '@svc/proto';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { connectionAgeOptions } from '../src/runner.js';

// Calls between services spread over every replica the peer's name resolves to, and servers retire
// connections so that clients look the name up again and find replicas added since.

const logger = createLogger({ service: 'grpc-balancing-test', level: 'silent' });
const identity = new ServiceIdentity('gateway', generateServiceTokenKeyPair().privateKey);

/** A payment-settler that records the client connection (peer) of every call, answering after `delayMs`. */
async function recordingServer(channelOptions: Record<string, number> = {}, delayMs = 0) {
  const peers: string[] = [];
  const handlers = new Proxy(
    {},
    {
      get: () => async (_request: unknown, context: { peer: string }) => {
        peers.push(context.peer);
        if (delayMs > 0) await sleep(delayMs);
        return { outcome: { case: 'refused', value: { message: 'recorded' } } };
      },
    },
  ) as ServiceImpl<(typeof PaymentSettler)['method']>;
  const server = createServiceGrpcServer(logger, { channelOptions }).add(PaymentSettler, handlers, {
    open: true,
  });
  const port = await server.listen('127.0.0.1:0');
  servers.push(server);
  return { port, peers };
}

const servers: GrpcServer[] = [];
const clients: object[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) closeClient(client);
  await Promise.all(servers.splice(0).map((server) => server.shutdown(100)));
});

function serviceClient(address: string) {
  const client = createClient(
    PaymentSettler,
    address,
    serviceClientOptions({ identity, audience: 'payment-settler' }),
  );
  clients.push(client);
  return client;
}

describe('calls from one service to another', () => {
  it('spread over every address of the peer (round_robin), where the default would pin one', async () => {
    const first = await recordingServer();
    const second = await recordingServer();
    // What a headless Service's DNS name resolves to: one address per ready replica.
    const replicas = `ipv4:127.0.0.1:${first.port},127.0.0.1:${second.port}`;

    const balanced = serviceClient(replicas);
    await waitForClientReady(balanced, 5_000);
    // round_robin picks among connected replicas: once both answered, it alternates between them.
    const deadline = Date.now() + 5_000;
    while ((first.peers.length === 0 || second.peers.length === 0) && Date.now() < deadline)
      await balanced.verifyPayment({ model: 'm' });
    first.peers.length = 0;
    second.peers.length = 0;
    for (let call = 0; call < 10; call++) await balanced.verifyPayment({ model: 'm' });
    expect(first.peers.length + second.peers.length).toBe(10);
    expect(first.peers.length).toBeGreaterThanOrEqual(4);
    expect(second.peers.length).toBeGreaterThanOrEqual(4);

    // gRPC's default policy (pick_first) sends every call to one replica.
    first.peers.length = 0;
    second.peers.length = 0;
    const pinned = createClient(PaymentSettler, replicas);
    clients.push(pinned);
    for (let call = 0; call < 10; call++) await pinned.verifyPayment({ model: 'm' });
    expect([first.peers.length, second.peers.length].sort()).toEqual([0, 10]);
  });

  it('move to a new connection once the server retires theirs, without cutting a call in flight', async () => {
    const server = await recordingServer(connectionAgeOptions(200));
    const client = serviceClient(`127.0.0.1:${server.port}`);
    for (let call = 0; call < 8; call++) {
      await client.verifyPayment({ model: 'm' });
      await sleep(100);
    }
    expect(new Set(server.peers).size).toBeGreaterThanOrEqual(2);

    // A call longer than the connection's age runs to its end (no grace period cuts it).
    const slow = await recordingServer(connectionAgeOptions(100), 700);
    const slowClient = serviceClient(`127.0.0.1:${slow.port}`);
    const answer = await slowClient.verifyPayment({ model: 'm' }, { timeoutMs: 5_000 });
    expect(answer.outcome.case).toBe('refused');
  });

  it('never retire a connection when the age is 0', () => {
    expect(connectionAgeOptions(0)).toEqual({});
    expect(connectionAgeOptions(300_000)).toEqual({ 'grpc.max_connection_age_ms': 300_000 });
  });
});
