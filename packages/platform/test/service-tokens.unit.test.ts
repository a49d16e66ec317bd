import { createPrivateKey } from 'node:crypto';
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
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import {
  ConfigError,
  createLogger,
  createServiceGrpcServer,
  generateServiceTokenKeyPair,
  loadConfig,
  methodGrants,
  SERVICE_CALL_GRANTS,
  serviceCallers,
  serviceClientOptions,
  ServiceIdentity,
  serviceTokenCallerSettings,
  serviceTokenKeyId,
  serviceTokenServerSettings,
  serviceTokenSettings,
  SERVICE_TOKEN_TYPE,
  type CallerKey,
  type InternalCaller,
  type ServiceTokenServerConfig,
} from '../src/index.js';

// Each calling service signs with a key pair of its own; a called service holds the public keys only,
// each bound to its caller, and grants each caller the methods it calls, nothing more.
const GATEWAY = generateServiceTokenKeyPair();
const ORCHESTRATOR = generateServiceTokenKeyPair();
const NEXT_GATEWAY = generateServiceTokenKeyPair();
const REPORTS = generateServiceTokenKeyPair();
const STRANGER = generateServiceTokenKeyPair();

const CALLER_KEYS: CallerKey[] = [
  { caller: 'gateway', publicKey: GATEWAY.publicKey },
  { caller: 'job-orchestrator', publicKey: ORCHESTRATOR.publicKey },
];
const REPORTS_CALLER: InternalCaller = {
  name: 'reports',
  publicKeys: [REPORTS.publicKey],
  methods: ['JobOrchestrator.RunCompletion', 'PaymentSettler.GetRequirements'],
};
const CONFIG: ServiceTokenServerConfig = {
  SERVICE_TOKEN_CALLER_KEYS: CALLER_KEYS,
  SERVICE_TOKEN_INTERNAL_CALLERS: [REPORTS_CALLER],
};

type Method = CallCredentials['method'];

/** What a server sees of a call of `method` carrying `authorization`. */
function callWith(
  authorization?: string,
  method: Method = PaymentSettler.method.verifyPayment,
): CallCredentials {
  const metadata = {
    get: (key: string) =>
      key === METADATA.authorization && authorization !== undefined ? [authorization] : [],
  } as unknown as CallCredentials['metadata'];
  return { metadata, peer: 'ipv4:127.0.0.1:1', method };
}

/** The caller an authenticator accepts for `authorization`, or the status and message of its refusal. */
async function outcome(
  authenticate: ReturnType<typeof serviceCallers>,
  authorization?: string,
  method?: Method,
): Promise<string> {
  try {
    return `accepted ${await authenticate(callWith(authorization, method))}`;
  } catch (error) {
    expect(error).toBeInstanceOf(RpcError);
    expect((error as RpcError).appCode).toBeUndefined();
    const status = (error as RpcError).status;
    const name = status === GrpcStatus.PERMISSION_DENIED ? 'PERMISSION_DENIED' : GrpcStatus[status];
    return `${name}: ${(error as RpcError).message}`;
  }
}

const settlerCallers = (config: ServiceTokenServerConfig = CONFIG, now?: () => number) =>
  serviceCallers(config, {
    service: 'payment-settler',
    grpcService: PaymentSettler,
    ...(now ? { now } : {}),
  });

const as = (name: string, privateKey: string, now?: () => number) =>
  new ServiceIdentity(name, privateKey, now ? { now } : {});

const refusedToken = (reason: string) => `UNAUTHENTICATED: service token refused: ${reason}`;

describe('service tokens', () => {
  const settler = settlerCallers();
  const verify = PaymentSettler.method.verifyPayment;
  const settle = PaymentSettler.method.settlePayment;

  it('let a caller through on a method it is granted, named', async () => {
    expect(
      await outcome(settler, as('gateway', GATEWAY.privateKey).authorization('payment-settler'), verify),
    ).toBe('accepted gateway');
    expect(
      await outcome(
        settler,
        as('job-orchestrator', ORCHESTRATOR.privateKey).authorization('payment-settler'),
        settle,
      ),
    ).toBe('accepted job-orchestrator');
  });

  // Regression: with one shared secret, the gateway could call SettlePayment itself.
  it('refuse the gateway SettlePayment, and the job-orchestrator what only the gateway calls (PERMISSION_DENIED)', async () => {
    const gateway = as('gateway', GATEWAY.privateKey).authorization('payment-settler');
    expect(await outcome(settler, gateway, settle)).toBe(
      'PERMISSION_DENIED: service token refused: gateway may not call PaymentSettler.SettlePayment',
    );
    // Refused again once the token is remembered: the grant is checked on every call, not once per token.
    expect(await outcome(settler, gateway, verify)).toBe('accepted gateway');
    expect(await outcome(settler, gateway, settle)).toMatch(/^PERMISSION_DENIED: /);
    const orchestrator = as('job-orchestrator', ORCHESTRATOR.privateKey).authorization('payment-settler');
    expect(await outcome(settler, orchestrator, verify)).toBe(
      'PERMISSION_DENIED: service token refused: job-orchestrator may not call PaymentSettler.VerifyPayment',
    );
  });

  // Regression: with one shared secret, any service could mint a token naming any other.
  it("refuse a token minted with one service's key naming another service", async () => {
    expect(
      await outcome(
        settler,
        as('job-orchestrator', GATEWAY.privateKey).authorization('payment-settler'),
        settle,
      ),
    ).toBe(refusedToken('signed with a key of gateway, not of job-orchestrator'));
    expect(
      await outcome(settler, as('reports', GATEWAY.privateKey).authorization('payment-settler'), verify),
    ).toBe(refusedToken('signed with a key of gateway, not of reports'));
    expect(
      await outcome(settler, as('gateway', REPORTS.privateKey).authorization('payment-settler'), verify),
    ).toBe(refusedToken('signed with a key of reports, not of gateway'));
  });

  it('hold no key that can sign: the verifier is built from public keys alone', () => {
    expect(Object.keys(serviceTokenServerSettings)).toEqual([
      'SERVICE_TOKEN_CALLER_KEYS',
      'SERVICE_TOKEN_INTERNAL_CALLERS',
    ]);
    expect(Object.keys(serviceTokenCallerSettings)).toEqual(['SERVICE_TOKEN_PRIVATE_KEY']);
    expect(serviceTokenCallerSettings.SERVICE_TOKEN_PRIVATE_KEY.secret).toBe(true);
  });

  it('refuse a call with no token, or with something else than a bearer token', async () => {
    expect(await outcome(settler)).toBe(refusedToken('no service token'));
    expect(await outcome(settler, '')).toBe(refusedToken('no service token'));
    expect(await outcome(settler, 'Basic dXNlcjpwYXNz')).toBe(refusedToken('not a bearer token'));
    expect(await outcome(settler, 'Bearer not.a.jwt')).toBe(refusedToken('malformed'));
  });

  it('refuse an expired token, and one too old whatever its exp says', async () => {
    const hourAgo = () => Date.now() - 3_600_000;
    expect(
      await outcome(settler, as('gateway', GATEWAY.privateKey, hourAgo).authorization('payment-settler')),
    ).toBe(refusedToken('expired'));
    const longLived = await new SignJWT({})
      .setProtectedHeader({ alg: 'EdDSA', typ: SERVICE_TOKEN_TYPE, kid: kidOf(GATEWAY.privateKey) })
      .setIssuer('gateway')
      .setAudience('payment-settler')
      .setIssuedAt(Math.floor(Date.now() / 1000) - 600)
      .setExpirationTime('1d')
      .sign(
        createPrivateKey({ key: Buffer.from(GATEWAY.privateKey, 'base64'), format: 'der', type: 'pkcs8' }),
      );
    expect(await outcome(settler, `Bearer ${longLived}`)).toBe(refusedToken('expired'));
  });

  it('refuse a token for another service, a key it does not know, and a forged signature', async () => {
    expect(await outcome(settler, as('gateway', GATEWAY.privateKey).authorization('key-service'))).toBe(
      refusedToken('not for payment-settler'),
    );
    expect(await outcome(settler, as('gateway', STRANGER.privateKey).authorization('payment-settler'))).toBe(
      refusedToken('signed with a key this service does not know'),
    );
    // The gateway's kid over claims it did not sign.
    const genuine = as('gateway', GATEWAY.privateKey).authorization('payment-settler');
    const [header, payload, signature] = genuine.slice('Bearer '.length).split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, unknown>;
    const forged = Buffer.from(JSON.stringify({ ...claims, exp: (claims.exp as number) + 1 })).toString(
      'base64url',
    );
    expect(await outcome(settler, `Bearer ${header}.${forged}.${signature}`)).toBe(
      refusedToken('bad signature'),
    );
  });

  it('refuse any algorithm but EdDSA (HS256 tokens of the shared secret included), and a token of another type', async () => {
    const kid = kidOf(GATEWAY.privateKey);
    const hs256 = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', typ: SERVICE_TOKEN_TYPE, kid })
      .setIssuer('gateway')
      .setAudience('payment-settler')
      .setIssuedAt()
      .setExpirationTime('1m')
      .sign(Buffer.from(GATEWAY.publicKey, 'base64'));
    expect(await outcome(settler, `Bearer ${hs256}`)).toBe(refusedToken('algorithm not accepted'));
    const [header, payload] = as('gateway', GATEWAY.privateKey)
      .authorization('payment-settler')
      .slice('Bearer '.length)
      .split('.');
    const unsigned = Buffer.from(
      JSON.stringify({
        ...(JSON.parse(Buffer.from(header!, 'base64url').toString()) as object),
        alg: 'none',
      }),
    ).toString('base64url');
    expect(await outcome(settler, `Bearer ${unsigned}.${payload}.`)).toMatch(
      /^UNAUTHENTICATED: service token refused: /,
    );
    const otherType = await new SignJWT({})
      .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid })
      .setIssuer('gateway')
      .setAudience('payment-settler')
      .setIssuedAt()
      .setExpirationTime('1m')
      .sign(
        createPrivateKey({ key: Buffer.from(GATEWAY.privateKey, 'base64'), format: 'der', type: 'pkcs8' }),
      );
    expect(await outcome(settler, `Bearer ${otherType}`)).toBe(refusedToken('claim typ check_failed'));
  });

  it("accept several keys per caller, so a caller's key pair rotates without a refused call", async () => {
    // Step 1: the called services accept the gateway's next key too; the gateway still signs with the current one.
    const both = settlerCallers({
      SERVICE_TOKEN_CALLER_KEYS: [...CALLER_KEYS, { caller: 'gateway', publicKey: NEXT_GATEWAY.publicKey }],
    });
    for (const key of [GATEWAY, NEXT_GATEWAY])
      expect(await outcome(both, as('gateway', key.privateKey).authorization('payment-settler'))).toBe(
        'accepted gateway',
      );
    // Step 3: the old key is gone.
    const rotated = settlerCallers({
      SERVICE_TOKEN_CALLER_KEYS: [{ caller: 'gateway', publicKey: NEXT_GATEWAY.publicKey }],
    });
    expect(await outcome(rotated, as('gateway', GATEWAY.privateKey).authorization('payment-settler'))).toBe(
      refusedToken('signed with a key this service does not know'),
    );
  });

  it('give an internal caller exactly its granted methods, on each service', async () => {
    const reports = as('reports', REPORTS.privateKey);
    expect(
      await outcome(settler, reports.authorization('payment-settler'), PaymentSettler.method.getRequirements),
    ).toBe('accepted reports');
    expect(await outcome(settler, reports.authorization('payment-settler'), settle)).toBe(
      'PERMISSION_DENIED: service token refused: reports may not call PaymentSettler.SettlePayment',
    );
    const orchestrator = serviceCallers(CONFIG, {
      service: 'job-orchestrator',
      grpcService: JobOrchestrator,
    });
    expect(
      await outcome(
        orchestrator,
        reports.authorization('job-orchestrator'),
        JobOrchestrator.method.runCompletion,
      ),
    ).toBe('accepted reports');
    expect(
      await outcome(
        orchestrator,
        reports.authorization('job-orchestrator'),
        JobOrchestrator.method.listModels,
      ),
    ).toBe('PERMISSION_DENIED: service token refused: reports may not call JobOrchestrator.ListModels');
    // Known to the key-service (same settings everywhere), granted nothing there.
    const keyService = serviceCallers(CONFIG, { service: 'key-service', grpcService: KeyService });
    expect(
      await outcome(keyService, reports.authorization('key-service'), KeyService.method.resolveKey),
    ).toBe('PERMISSION_DENIED: service token refused: reports may not call KeyService.ResolveKey');
  });

  it('grant every method the services call of each other, and every grant names a method that exists', () => {
    const granted = (grpcService: typeof KeyService | typeof JobOrchestrator | typeof PaymentSettler) =>
      Object.fromEntries(
        [...methodGrants({ SERVICE_TOKEN_CALLER_KEYS: [] }, grpcService)].map(([caller, methods]) => [
          caller,
          [...methods].sort(),
        ]),
      );
    expect(granted(PaymentSettler)).toEqual({
      gateway: ['GetRequirements', 'ReleasePayment', 'VerifyPayment'],
      'job-orchestrator': ['SettlePayment'],
    });
    expect(granted(JobOrchestrator)).toEqual({
      gateway: ['DescribeChain', 'ListModels', 'QuoteFee', 'RunCompletion'],
    });
    expect(Object.keys(granted(KeyService))).toEqual(['gateway']);
    expect(SERVICE_CALL_GRANTS['key-service']).toEqual([]);
    expect(SERVICE_CALL_GRANTS['payment-settler']).toEqual([]);
    expect(() =>
      methodGrants(
        {
          SERVICE_TOKEN_CALLER_KEYS: [],
          SERVICE_TOKEN_INTERNAL_CALLERS: [
            { ...REPORTS_CALLER, methods: ['JobOrchestrator.RunCompletions'] },
          ],
        },
        JobOrchestrator,
      ),
    ).toThrow(
      'reports is granted JobOrchestrator.RunCompletions, which svc.orchestrator.v1.JobOrchestrator does not have',
    );
  });

  it('are minted once per callee and reused until half their life is gone', () => {
    let now = Date.parse('2026-01-01T00:00:00Z');
    const identity = as('gateway', GATEWAY.privateKey, () => now);
    const first = identity.authorization('payment-settler');
    expect(identity.authorization('key-service')).not.toBe(first);
    now += 29_000;
    expect(identity.authorization('payment-settler')).toBe(first);
    now += 1_000;
    expect(identity.authorization('payment-settler')).not.toBe(first);
  });

  it('verified once, pass without another verification (a plain answer) until they expire', async () => {
    let now = Date.now();
    const server = settlerCallers(CONFIG, () => now);
    const token = as('gateway', GATEWAY.privateKey, () => now).authorization('payment-settler');
    const first = server(callWith(token));
    expect(first).toBeInstanceOf(Promise);
    expect(await first).toBe('gateway');
    expect(server(callWith(token))).toBe('gateway');
    now += 60_000 + 31_000;
    expect(await outcome(server, token)).toBe(refusedToken('expired'));
  });

  it('read their keys and internal callers from the settings, checked', () => {
    const pem = `-----BEGIN PUBLIC KEY-----\n${GATEWAY.publicKey}\n-----END PUBLIC KEY-----\n`;
    const loaded = loadConfig(serviceTokenSettings, {
      SERVICE_TOKEN_PRIVATE_KEY: `-----BEGIN PRIVATE KEY-----\n${ORCHESTRATOR.privateKey}\n-----END PRIVATE KEY-----`,
      SERVICE_TOKEN_CALLER_KEYS: ` gateway=${GATEWAY.publicKey} , gateway=${NEXT_GATEWAY.publicKey},job-orchestrator=${ORCHESTRATOR.publicKey}`,
      SERVICE_TOKEN_INTERNAL_CALLERS: JSON.stringify([
        { name: 'reports', publicKeys: [pem], methods: ['JobOrchestrator.RunCompletion'] },
      ]),
    });
    expect(loaded.SERVICE_TOKEN_CALLER_KEYS).toEqual([
      { caller: 'gateway', publicKey: GATEWAY.publicKey },
      { caller: 'gateway', publicKey: NEXT_GATEWAY.publicKey },
      { caller: 'job-orchestrator', publicKey: ORCHESTRATOR.publicKey },
    ]);
    expect(loaded.SERVICE_TOKEN_INTERNAL_CALLERS).toEqual([
      { name: 'reports', publicKeys: [GATEWAY.publicKey], methods: ['JobOrchestrator.RunCompletion'] },
    ]);
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(serviceTokenSettings, env);
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        return (error as ConfigError).problems;
      }
      return [];
    };
    expect(problems({})).toEqual([
      'SERVICE_TOKEN_PRIVATE_KEY is required',
      'SERVICE_TOKEN_CALLER_KEYS is required',
    ]);
    const valid = {
      SERVICE_TOKEN_PRIVATE_KEY: GATEWAY.privateKey,
      SERVICE_TOKEN_CALLER_KEYS: `gateway=${GATEWAY.publicKey}`,
    };
    expect(problems({ ...valid, SERVICE_TOKEN_PRIVATE_KEY: 'c2hvcnQ=' })).toEqual([
      'SERVICE_TOKEN_PRIVATE_KEY must be a PKCS#8 private key (PEM or its base64 body)',
    ]);
    expect(problems({ ...valid, SERVICE_TOKEN_CALLER_KEYS: `reports=${REPORTS.publicKey}` })).toEqual([
      expect.stringContaining(
        'SERVICE_TOKEN_CALLER_KEYS names "reports", not a service (internal callers are SERVICE_TOKEN_INTERNAL_CALLERS)',
      ),
    ]);
    expect(
      problems({
        ...valid,
        SERVICE_TOKEN_INTERNAL_CALLERS: JSON.stringify([
          { name: 'gateway', publicKeys: [REPORTS.publicKey], methods: [] },
        ]),
      }),
    ).toEqual([
      expect.stringContaining(
        'SERVICE_TOKEN_INTERNAL_CALLERS names gateway, a service: an internal caller needs a name of its own',
      ),
    ]);
    expect(
      problems({
        ...valid,
        SERVICE_TOKEN_INTERNAL_CALLERS: JSON.stringify([
          { name: 'reports', publicKeys: [REPORTS.publicKey], methods: ['RunCompletion'] },
        ]),
      }),
    ).toHaveLength(1);
    expect(() => new ServiceIdentity('gateway', 'not a key')).toThrow();
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
      authenticate: settlerCallers(),
    });
    address = `127.0.0.1:${await server.listen('127.0.0.1:0')}`;
  });

  afterAll(async () => {
    await server.shutdown(100);
  });

  it('carry the token of serviceClientOptions, refuse a call without one or of a method not granted, and log refusals without a token', async () => {
    const clientAs = (name: string, privateKey: string) =>
      createClient(
        PaymentSettler,
        address,
        serviceClientOptions({
          identity: new ServiceIdentity(name, privateKey),
          audience: 'payment-settler',
        }),
      );
    const orchestrator = clientAs('job-orchestrator', ORCHESTRATOR.privateKey);
    const gateway = clientAs('gateway', GATEWAY.privateKey);
    const anonymous = createClient(PaymentSettler, address);
    try {
      const answered = await orchestrator.settlePayment({ reservationId: 'r' });
      expect(answered.outcome.case).toBe('refused');
      const refused = (await anonymous.verifyPayment({ model: 'm' }).catch((e: unknown) => e)) as RpcError;
      expect(refused.status).toBe(GrpcStatus.UNAUTHENTICATED);
      expect(refused.message).toBe('service token refused: no service token');
      // Regression: the gateway settling a payment itself.
      const denied = (await gateway
        .settlePayment({ reservationId: 'r' })
        .catch((e: unknown) => e)) as RpcError;
      expect(denied.status).toBe(GrpcStatus.PERMISSION_DENIED);
      expect(denied.message).toBe('service token refused: gateway may not call PaymentSettler.SettlePayment');
      const lines = logged
        .filter((entry) => entry.includes('gRPC call refused'))
        .map((entry) => JSON.parse(entry) as Record<string, unknown>);
      expect(lines).toEqual([
        expect.objectContaining({
          level: 'warn',
          method: 'VerifyPayment',
          reason: 'service token refused: no service token',
        }),
        expect.objectContaining({
          method: 'SettlePayment',
          reason: 'service token refused: gateway may not call PaymentSettler.SettlePayment',
        }),
      ]);
      expect(logged.join('')).not.toContain('Bearer');
    } finally {
      closeClient(orchestrator);
      closeClient(gateway);
      closeClient(anonymous);
    }
  });
});

function kidOf(privateKey: string): string {
  return serviceTokenKeyId(
    createPrivateKey({ key: Buffer.from(privateKey, 'base64'), format: 'der', type: 'pkcs8' }),
  );
}
