import { createHmac } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SignJWT } from 'jose';
import {
  closeClient,
  createClient,
  GrpcStatus,
  METADATA,
  RpcError,
  type CallCredentials,
  type GrpcServer,
  type ServiceImpl,
} from '@svc/proto';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import {
  ConfigError,
  createLogger,
  createServiceGrpcServer,
  loadConfig,
  serviceCallers,
  serviceClientOptions,
  ServiceIdentity,
  serviceTokenCallerSettings,
  serviceTokenSettings,
  SERVICE_TOKEN_TYPE,
  type ServiceName,
} from '../src/index.js';

const SECRET = 'current-service-token-secret-0123456789abcdef';
const PREVIOUS = 'previous-service-token-secret-0123456789abcdef';
const NEXT = 'next-service-token-secret-0123456789abcdef-----';

/** What a server sees of a call carrying `authorization`. */
function callWith(authorization?: string): CallCredentials {
  const metadata = {
    get: (key: string) =>
      key === METADATA.authorization && authorization !== undefined ? [authorization] : [],
  } as unknown as CallCredentials['metadata'];
  return { metadata, peer: 'ipv4:127.0.0.1:1', method: PaymentSettler.method.verifyPayment };
}

/** The caller an authenticator accepts for `authorization`, or the message of its refusal. */
async function outcome(
  authenticate: ReturnType<typeof serviceCallers>,
  authorization?: string,
): Promise<string> {
  try {
    return `accepted ${await authenticate(callWith(authorization))}`;
  } catch (error) {
    expect(error).toBeInstanceOf(RpcError);
    expect((error as RpcError).status).toBe(GrpcStatus.UNAUTHENTICATED);
    expect((error as RpcError).appCode).toBeUndefined();
    return (error as RpcError).message;
  }
}

const settlerCallers = (
  secrets: { SERVICE_TOKEN_SECRET: string; SERVICE_TOKEN_VERIFICATION_SECRETS?: string[] },
  now?: () => number,
) =>
  serviceCallers(secrets, {
    service: 'payment-settler',
    callers: ['gateway', 'job-orchestrator'],
    ...(now ? { now } : {}),
  });

describe('service tokens', () => {
  const settler = settlerCallers({ SERVICE_TOKEN_SECRET: SECRET });
  const as = (name: ServiceName, secret = SECRET, now?: () => number) =>
    new ServiceIdentity(name, secret, now ? { now } : {});

  it('let a listed caller through, named', async () => {
    expect(await outcome(settler, as('gateway').authorization('payment-settler'))).toBe('accepted gateway');
    expect(await outcome(settler, as('job-orchestrator').authorization('payment-settler'))).toBe(
      'accepted job-orchestrator',
    );
  });

  it('refuse a call with no token, or with something else than a bearer token', async () => {
    expect(await outcome(settler)).toBe('service token refused: no service token');
    expect(await outcome(settler, '')).toBe('service token refused: no service token');
    expect(await outcome(settler, 'Basic dXNlcjpwYXNz')).toBe('service token refused: not a bearer token');
    expect(await outcome(settler, 'Bearer not.a.jwt')).toBe('service token refused: malformed');
  });

  it('refuse an expired token, and one too old whatever its exp says', async () => {
    const hourAgo = () => Date.now() - 3_600_000;
    expect(await outcome(settler, as('gateway', SECRET, hourAgo).authorization('payment-settler'))).toBe(
      'service token refused: expired',
    );
    // Minted by hand with a long exp: the age limit still applies.
    const key = new TextEncoder().encode(SECRET);
    const kid = (await decodeHeader(as('gateway').authorization('payment-settler'))).kid as string;
    const longLived = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', typ: SERVICE_TOKEN_TYPE, kid })
      .setIssuer('gateway')
      .setAudience('payment-settler')
      .setIssuedAt(Math.floor(Date.now() / 1000) - 600)
      .setExpirationTime('1d')
      .sign(key);
    expect(await outcome(settler, `Bearer ${longLived}`)).toBe('service token refused: expired');
  });

  it('refuse a token for another service, and one from a caller the service does not accept', async () => {
    expect(await outcome(settler, as('gateway').authorization('key-service'))).toBe(
      'service token refused: not for payment-settler',
    );
    expect(await outcome(settler, as('key-service').authorization('payment-settler'))).toBe(
      'service token refused: key-service may not call payment-settler',
    );
  });

  it('refuse a token signed with another secret, or whose signature does not match', async () => {
    expect(
      await outcome(
        settler,
        as('gateway', 'another-secret-of-at-least-32-bytes!').authorization('payment-settler'),
      ),
    ).toBe('service token refused: signed with a secret this service does not know');
    // The kid of the right secret over a signature of another: forged.
    const genuine = as('gateway').authorization('payment-settler');
    const [header, payload] = genuine.slice('Bearer '.length).split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, unknown>;
    const forgedPayload = Buffer.from(JSON.stringify({ ...claims, iss: 'job-orchestrator' })).toString(
      'base64url',
    );
    expect(await outcome(settler, `Bearer ${header}.${forgedPayload}.${genuine.split('.')[2]}`)).toBe(
      'service token refused: bad signature',
    );
    const wrongKey = createHmac('sha256', 'guessed').update(`${header}.${payload}`).digest('base64url');
    expect(await outcome(settler, `Bearer ${header}.${payload}.${wrongKey}`)).toBe(
      'service token refused: bad signature',
    );
  });

  it('refuse any algorithm but HS256, and a token of another type', async () => {
    const genuine = as('gateway').authorization('payment-settler').slice('Bearer '.length);
    const [header, payload] = genuine.split('.');
    const unsigned = Buffer.from(
      JSON.stringify({
        ...(JSON.parse(Buffer.from(header!, 'base64url').toString()) as object),
        alg: 'none',
      }),
    ).toString('base64url');
    expect(await outcome(settler, `Bearer ${unsigned}.${payload}.`)).toMatch(/^service token refused: /);
    expect(await outcome(settler, `Bearer ${unsigned}.${payload}.`)).not.toMatch(/^accepted/);
    const kid = (await decodeHeader(`Bearer ${genuine}`)).kid as string;
    const otherType = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid })
      .setIssuer('gateway')
      .setAudience('payment-settler')
      .setIssuedAt()
      .setExpirationTime('1m')
      .sign(new TextEncoder().encode(SECRET));
    expect(await outcome(settler, `Bearer ${otherType}`)).toBe(
      'service token refused: claim typ check_failed',
    );
  });

  it('accept the verification secrets too, so a secret rotates without a refused call', async () => {
    // Step 1: every service accepts the next secret; callers still sign with the current one.
    const step1 = settlerCallers({
      SERVICE_TOKEN_SECRET: SECRET,
      SERVICE_TOKEN_VERIFICATION_SECRETS: [NEXT],
    });
    // Step 2: every service signs with the next secret and still accepts the current, now previous, one.
    const step2 = settlerCallers({
      SERVICE_TOKEN_SECRET: NEXT,
      SERVICE_TOKEN_VERIFICATION_SECRETS: [SECRET],
    });
    for (const server of [step1, step2])
      for (const signer of [SECRET, NEXT])
        expect(await outcome(server, as('gateway', signer).authorization('payment-settler'))).toBe(
          'accepted gateway',
        );
    // Step 3: the old secret is gone.
    const step3 = settlerCallers({ SERVICE_TOKEN_SECRET: NEXT });
    expect(await outcome(step3, as('gateway', SECRET).authorization('payment-settler'))).toBe(
      'service token refused: signed with a secret this service does not know',
    );
    const withPrevious = settlerCallers({
      SERVICE_TOKEN_SECRET: SECRET,
      SERVICE_TOKEN_VERIFICATION_SECRETS: [PREVIOUS, NEXT],
    });
    expect(
      await outcome(withPrevious, as('job-orchestrator', PREVIOUS).authorization('payment-settler')),
    ).toBe('accepted job-orchestrator');
  });

  it('are minted once per callee and reused until half their life is gone', () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const identity = as('gateway', SECRET, () => now);
    const first = identity.authorization('payment-settler');
    expect(identity.authorization('key-service')).not.toBe(first);
    now += 29_000;
    expect(identity.authorization('payment-settler')).toBe(first);
    now += 1_000;
    expect(identity.authorization('payment-settler')).not.toBe(first);
  });

  it('verified once, pass without another verification (a plain answer) until they expire', async () => {
    let now = Date.now();
    const server = settlerCallers({ SERVICE_TOKEN_SECRET: SECRET }, () => now);
    const token = as('gateway', SECRET, () => now).authorization('payment-settler');
    const first = server(callWith(token));
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toBe('gateway');
    expect(server(callWith(token))).toBe('gateway');
    now += 60_000 + 31_000;
    expect(await outcome(server, token)).toBe('service token refused: expired');
  });

  it('read their secrets from the settings, checked and never echoed', () => {
    expect(
      loadConfig(serviceTokenSettings, {
        SERVICE_TOKEN_SECRET: SECRET,
        SERVICE_TOKEN_VERIFICATION_SECRETS: ` ${PREVIOUS} , ${NEXT} `,
      }),
    ).toEqual({ SERVICE_TOKEN_SECRET: SECRET, SERVICE_TOKEN_VERIFICATION_SECRETS: [PREVIOUS, NEXT] });
    expect(
      loadConfig(serviceTokenSettings, { SERVICE_TOKEN_SECRET: SECRET }).SERVICE_TOKEN_VERIFICATION_SECRETS,
    ).toEqual([]);
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(serviceTokenSettings, env);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as ConfigError).problems;
      }
      return [];
    };
    expect(problems({})).toEqual(['SERVICE_TOKEN_SECRET is required']);
    expect(problems({ SERVICE_TOKEN_SECRET: 'short-secret' })).toEqual([
      'SERVICE_TOKEN_SECRET must be at least 32 bytes',
    ]);
    expect(
      problems({
        SERVICE_TOKEN_SECRET: `${SECRET} x`,
        SERVICE_TOKEN_VERIFICATION_SECRETS: `${PREVIOUS},short`,
      }),
    ).toEqual([
      'SERVICE_TOKEN_SECRET must hold no spaces or commas',
      'SERVICE_TOKEN_VERIFICATION_SECRETS must be at least 32 bytes',
    ]);
    expect(Object.keys(serviceTokenCallerSettings)).toEqual(['SERVICE_TOKEN_SECRET']);
    expect(() => new ServiceIdentity('gateway', 'short')).toThrow();
  });
});

describe('service tokens over a real gRPC connection', () => {
  const logged: string[] = [];
  const logger = createLogger({
    service: 'tokens-test',
    level: 'info',
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        logged.push(chunk.toString());
        done();
      },
    }),
  });
  let server: GrpcServer;
  let address: string;

  beforeAll(async () => {
    // Every handler answers the same: the authentication is what is tested.
    const handlers = new Proxy(
      {},
      { get: () => async () => ({ outcome: { case: 'refused', value: { message: 'handled' } } }) },
    ) as ServiceImpl<(typeof PaymentSettler)['method']>;
    server = createServiceGrpcServer(logger, { requireAccess: true }).add(PaymentSettler, handlers, {
      authenticate: settlerCallers({ SERVICE_TOKEN_SECRET: SECRET }),
    });
    address = `127.0.0.1:${await server.listen('127.0.0.1:0')}`;
  });

  afterAll(async () => {
    await server.shutdown(100);
  });

  it('carry the token of serviceClientOptions, refuse a call without one, and log the refusal without a token', async () => {
    const caller = createClient(
      PaymentSettler,
      address,
      serviceClientOptions({
        identity: new ServiceIdentity('job-orchestrator', SECRET),
        audience: 'payment-settler',
      }),
    );
    const anonymous = createClient(PaymentSettler, address);
    try {
      const answered = await caller.verifyPayment({ model: 'm' });
      expect(answered.outcome.case).toBe('refused');
      const refused = (await anonymous.verifyPayment({ model: 'm' }).catch((e: unknown) => e)) as RpcError;
      expect(refused.status).toBe(GrpcStatus.UNAUTHENTICATED);
      expect(refused.message).toBe('service token refused: no service token');
      const line = JSON.parse(logged.find((entry) => entry.includes('gRPC call refused')) ?? '{}') as Record<
        string,
        unknown
      >;
      expect(line).toMatchObject({
        level: 'warn',
        method: 'VerifyPayment',
        reason: 'service token refused: no service token',
      });
      expect(logged.join('')).not.toContain('Bearer');
    } finally {
      closeClient(caller);
      closeClient(anonymous);
    }
  });
});

async function decodeHeader(authorization: string): Promise<Record<string, unknown>> {
  const header = authorization.slice('Bearer '.length).split('.')[0]!;
  return JSON.parse(Buffer.from(header, 'base64url').toString()) as Record<string, unknown>;
}
