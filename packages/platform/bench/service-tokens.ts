// What service tokens cost a gRPC call between the services: the token's parts alone (minting and
// verifying, cached and not), then unary calls over loopback to one service served open and the same
// service behind serviceCallers, called with and without serviceClientOptions' token. One run, one
// process (client and server share the 2 cores, as the all-in-one target does); prints the figures and
// the ratios to the open service.
//
//   npm run bench -w @svc/platform        (BENCH_CALLS, BENCH_CONCURRENCY, BENCH_ROUNDS)
import { performance } from 'node:perf_hooks';
import { closeClient, createClient, METADATA, type CallCredentials, type ServiceImpl } from '@svc/proto';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { SignJWT } from 'jose';
import {
  createLogger,
  createServiceGrpcServer,
  serviceCallers,
  serviceClientOptions,
  generateServiceTokenKeyPair,
  parseServiceTokenPrivateKey,
  ServiceIdentity,
  SERVICE_TOKEN_ALGORITHM,
  SERVICE_TOKEN_TYPE,
} from '../src/index.js';

/** Calls per case and round with CONCURRENCY in flight; a fifth as many again one at a time. */
const CALLS = Number(process.env.BENCH_CALLS ?? 3000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12);
const KEYS = generateServiceTokenKeyPair();
const SECRET = KEYS.privateKey;
const CALLERS = {
  SERVICE_TOKEN_CALLER_KEYS: [{ caller: 'gateway', publicKey: KEYS.publicKey }],
} as const;
const GUARDED = { service: 'payment-settler', grpcService: PaymentSettler } as const;
const logger = createLogger({ service: 'service-tokens-bench', level: 'silent' });

function callWith(authorization: string): CallCredentials {
  const metadata = {
    get: (key: string) => (key === METADATA.authorization ? [authorization] : []),
  } as unknown as CallCredentials['metadata'];
  return { metadata, peer: 'bench', method: PaymentSettler.method.getRequirements };
}

/** Mean microseconds per run of `step` (given 0 to runs - 1) over `runs` runs, after a warm-up (given runs and on). */
async function perRun(runs: number, step: (index: number) => unknown): Promise<number> {
  for (let index = 0; index < Math.min(1000, runs); index++) await step(runs + index);
  const started = performance.now();
  for (let index = 0; index < runs; index++) await step(index);
  return ((performance.now() - started) * 1000) / runs;
}

async function tokenParts(): Promise<Array<{ part: string; 'µs per call': string }>> {
  const identity = new ServiceIdentity('gateway', SECRET);
  const cachedMint = await perRun(200_000, () => identity.authorization('payment-settler'));
  // A fresh identity per call: a token signed every time.
  const freshMint = await perRun(20_000, () =>
    new ServiceIdentity('gateway', SECRET).authorization('payment-settler'),
  );
  const authorization = identity.authorization('payment-settler');
  const remembered = serviceCallers(CALLERS, GUARDED);
  await remembered(callWith(authorization));
  const cachedVerify = await perRun(200_000, () => remembered(callWith(authorization)));
  // Distinct tokens (their own jti each, signed with jose like any EdDSA JWT) so every call is one
  // verification, through the callee that serves the calls.
  const header = JSON.parse(
    Buffer.from(authorization.split(' ')[1]!.split('.')[0]!, 'base64url').toString(),
  ) as {
    kid: string;
  };
  const key = parseServiceTokenPrivateKey(SECRET);
  const tokens = await Promise.all(
    Array.from({ length: 21_000 }, (_, index) =>
      new SignJWT({ jti: String(index) })
        .setProtectedHeader({ alg: SERVICE_TOKEN_ALGORITHM, typ: SERVICE_TOKEN_TYPE, kid: header.kid })
        .setIssuer('gateway')
        .setAudience('payment-settler')
        .setIssuedAt()
        .setExpirationTime('1m')
        .sign(key),
    ),
  );
  const joseVerify = await perRun(20_000, (index) => remembered(callWith(`Bearer ${tokens[index]!}`)));
  const format = (us: number) => us.toFixed(us < 1 ? 3 : 1);
  return [
    { part: 'caller: token of the call (kept)', 'µs per call': format(cachedMint) },
    { part: 'caller: token minted (Ed25519 sign)', 'µs per call': format(freshMint) },
    { part: 'callee: token seen before (kept)', 'µs per call': format(cachedVerify) },
    { part: 'callee: token verified (jose)', 'µs per call': format(joseVerify) },
  ];
}

interface CallRun {
  readonly name: string;
  readonly sequentialUs: number;
  readonly callsPerSecond: number;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** One case's server and client, started for one round. */
async function startCase(authenticated: boolean, handlers: ServiceImpl<(typeof PaymentSettler)['method']>) {
  const server = createServiceGrpcServer(logger).add(
    PaymentSettler,
    handlers,
    authenticated
      ? {
          authenticate: serviceCallers(CALLERS, GUARDED),
        }
      : { open: true },
  );
  const address = `127.0.0.1:${await server.listen('127.0.0.1:0')}`;
  const client = createClient(
    PaymentSettler,
    address,
    authenticated
      ? serviceClientOptions({
          identity: new ServiceIdentity('gateway', SECRET),
          audience: 'payment-settler',
        })
      : { defaultUnaryTimeoutMs: 10_000 },
  );
  const call = () => client.getRequirements({ model: 'm', resourceUrl: 'https://x.test/v1' });
  for (let warm = 0; warm < 500; warm++) await call();
  return {
    call,
    async stop() {
      closeClient(client);
      await server.shutdown(100);
    },
  };
}

/**
 * Both cases in alternating rounds (the machine's other load lands on both alike), each round on servers
 * and clients of its own, started and measured first by each case in turn (whichever server binds first
 * measures a few percent slower); a round is a run of calls one at a time and one with CONCURRENCY in
 * flight per case. The medians of the rounds.
 */
async function calls(): Promise<CallRun[]> {
  const handlers = new Proxy(
    {},
    { get: () => async () => ({ requirements: { scheme: 'prepaid-debit' } }) },
  ) as ServiceImpl<(typeof PaymentSettler)['method']>;
  const cases = [
    {
      name: 'open service, no token',
      authenticated: false,
      sequential: [] as number[],
      concurrent: [] as number[],
    },
    { name: 'service tokens', authenticated: true, sequential: [] as number[], concurrent: [] as number[] },
  ];
  for (let round = 0; round < ROUNDS; round++) {
    const ordered = round % 2 === 0 ? cases : [...cases].reverse();
    const started = [];
    for (const entry of ordered) started.push(await startCase(entry.authenticated, handlers));
    try {
      for (const [index, entry] of ordered.entries()) {
        const { call } = started[index]!;
        entry.sequential.push(await perRun(Math.floor(CALLS / 5), call));
        const began = performance.now();
        let next = 0;
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => {
            while (next++ < CALLS) await call();
          }),
        );
        entry.concurrent.push(CALLS / ((performance.now() - began) / 1000));
      }
    } finally {
      for (const { stop } of started) await stop();
    }
  }
  return cases.map(({ name, sequential, concurrent }) => ({
    name,
    sequentialUs: median(sequential),
    callsPerSecond: median(concurrent),
  }));
}

const parts = await tokenParts();
console.log('\nService token parts, one process:');
console.table(parts);
const runs = await calls();
const [bare, tokened] = runs as [CallRun, CallRun];
console.log(
  `\nUnary GetRequirements over loopback gRPC, medians of ${ROUNDS} rounds, each of ${CALLS} calls (${CONCURRENCY} in flight) and ${Math.floor(CALLS / 5)} one at a time per case:`,
);
console.table(
  runs.map((run) => ({
    case: run.name,
    'µs per call, one at a time': run.sequentialUs.toFixed(0),
    'calls/s, concurrent': Math.round(run.callsPerSecond),
    'latency vs open': (run.sequentialUs / bare.sequentialUs).toFixed(3),
    'calls/s vs open': (run.callsPerSecond / bare.callsPerSecond).toFixed(3),
  })),
);
console.log(
  `service tokens / open: ${(tokened.sequentialUs / bare.sequentialUs).toFixed(3)}x latency one at a time, ` +
    `${(tokened.callsPerSecond / bare.callsPerSecond).toFixed(3)}x throughput`,
);
