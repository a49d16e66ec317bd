import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Wallet } from 'ethers';
import { SignJWT } from 'jose';
import { GrpcStatus, type RpcError } from '@svc/proto';
import { freePort } from '@svc/testkit';
import { connectInternalCaller } from '../examples/internal-caller.js';
import { mintKey, signIn, Stack, type StackFile } from './support/stack.js';

// An internal caller of the deploying team on the same footing as the services: its own name and Ed25519
// key, the methods `npm start` was told it may call (SERVICE_TOKEN_INTERNAL_CALLERS), and the example
// client of docs/proto.md. It runs a completion through RunCompletion paid by an svc_ API key, and is
// refused every method it was not granted.

const GRANTED = [
  'KeyService.ResolveKey',
  'KeyService.ReserveSpend',
  'KeyService.CommitSpend',
  'KeyService.ReleaseSpend',
  'JobOrchestrator.QuoteFee',
  'JobOrchestrator.RunCompletion',
];

const errorOf = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => error as RpcError,
  );

describe('an internal caller of the gRPC APIs (all-in-one)', () => {
  let stateDir: string;
  let stack: Stack | undefined;
  let caller: ReturnType<typeof connectInternalCaller>;
  let base: string;
  let stackFile: StackFile;
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const privateKeyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'svc-e2e-caller-'));
    const [port, grpcPort] = [await freePort(), await freePort()];
    base = `http://localhost:${port}`;
    stack = await Stack.start({
      PORT: String(port),
      GRPC_PORT: String(grpcPort),
      STATE_DIR: stateDir,
      DEVNET_PORT: '0',
      DEVNET_FILE: join(stateDir, 'devnet.json'),
      SERVICE_TOKEN_INTERNAL_CALLERS: JSON.stringify([
        {
          name: 'reports',
          publicKeys: [publicKey.export({ type: 'spki', format: 'der' }).toString('base64')],
          methods: GRANTED,
        },
      ]),
    });
    stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
    const address = `127.0.0.1:${grpcPort}`;
    caller = connectInternalCaller({
      name: 'reports',
      privateKeyPem,
      keyService: address,
      jobOrchestrator: address,
    });
  }, 120_000);

  afterAll(async () => {
    caller?.close();
    stack?.kill();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('runs a completion through RunCompletion, paid by an svc_ API key within its cap', async () => {
    const demo = new Wallet(stackFile.demoWallet!.privateKey);
    const key = await mintKey(base, (await signIn(base, demo)).token, { name: 'reports' });
    const completion = await caller.complete(key, stackFile.models[0]!, 'Hello');
    expect(completion.text).toMatch(/^You said: Hello/);
    expect(completion.chargedWei).toBeGreaterThan(0n);
    // The spend counts against the key like a /v1 call's.
    const listed = await fetch(`${base}/api/api-keys`, {
      headers: { authorization: `Bearer ${(await signIn(base, demo)).token}` },
    });
    const data = (await listed.json()) as Array<{ name: string; spentWei: string }>;
    expect(data.find((entry) => entry.name === 'reports')?.spentWei).toBe(completion.chargedWei.toString());
  }, 90_000);

  it('is refused PERMISSION_DENIED on every method it was not granted', async () => {
    const { keyService, orchestrator, tokens } = caller;
    const token = (await signIn(base, new Wallet(stackFile.demoWallet!.privateKey))).token;
    const refusals = await Promise.all([
      errorOf(keyService.mintKey({ signInToken: token }, { metadata: await tokens.metadata('key-service') })),
      errorOf(orchestrator.listModels({}, { metadata: await tokens.metadata('job-orchestrator') })),
    ]);
    expect(refusals.map((error) => [error?.status, error?.message])).toEqual([
      [GrpcStatus.PERMISSION_DENIED, 'service token refused: reports may not call KeyService.MintKey'],
      [
        GrpcStatus.PERMISSION_DENIED,
        'service token refused: reports may not call JobOrchestrator.ListModels',
      ],
    ]);
  });

  it('cannot pass for a service with its key', async () => {
    // Its own key, naming the gateway: refused before any grant is looked at.
    const forged = await new SignJWT({})
      .setProtectedHeader({
        alg: 'EdDSA',
        typ: 'svc-service+jwt',
        kid: (
          JSON.parse(
            Buffer.from(
              (await caller.tokens.metadata('key-service')).authorization!.split('.')[0]!.slice(7),
              'base64url',
            ).toString(),
          ) as { kid: string }
        ).kid,
      })
      .setIssuer('gateway')
      .setAudience('key-service')
      .setIssuedAt()
      .setExpirationTime('60s')
      .sign(privateKey);
    const error = await errorOf(
      caller.keyService.mintKey({}, { metadata: { authorization: `Bearer ${forged}` } }),
    );
    expect([error?.status, error?.message]).toEqual([
      GrpcStatus.UNAUTHENTICATED,
      'service token refused: signed with a key of reports, not of gateway',
    ]);
  });
});
