import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { loadConfig, serviceTokenSettings, ServiceIdentity, serviceCallers } from '@svc/platform';
import { localSecretSettings, localServiceTokenKeys } from '../src/local-secrets.js';

/** The part of PaymentSettler's descriptor an authenticator reads. */
const PaymentSettler = {
  name: 'PaymentSettler',
  typeName: 'svc.payment.v1.PaymentSettler',
  methods: [
    { name: 'SettlePayment' },
    { name: 'GetRequirements' },
    { name: 'VerifyPayment' },
    { name: 'ReleasePayment' },
  ],
} as const;

let stateDir: string;

beforeEach(() => {
  stateDir = mkdtempSync(join(tmpdir(), 'svc-secrets-'));
});

afterEach(() => {
  rmSync(stateDir, { recursive: true, force: true });
});

describe('the all-in-one secrets', () => {
  it('are generated once, owner-only, and the same on the next start', () => {
    const first = localSecretSettings({}, stateDir);
    expect(first.SIGNIN_TOKEN_SIGNING_KEY).toContain('-----BEGIN PRIVATE KEY-----');
    expect(first.SIGNIN_TOKEN_SIGNING_KEY_ID).toMatch(/^local-/);
    expect(first.API_KEY_PEPPER?.length).toBeGreaterThanOrEqual(32);
    const keys = localServiceTokenKeys(stateDir);
    expect(first.SERVICE_TOKEN_CALLER_KEYS).toBe(
      `gateway=${keys.gateway.publicKey},job-orchestrator=${keys['job-orchestrator'].publicKey}`,
    );
    expect(keys.gateway.privateKey).not.toBe(keys['job-orchestrator'].privateKey);
    expect(statSync(join(stateDir, 'secrets.json')).mode & 0o777).toBe(0o600);
    expect(localSecretSettings({}, stateDir)).toEqual(first);
  });

  it("yield to the environment's: the signing key only together with its id", () => {
    const derived = localSecretSettings({ SIGNIN_TOKEN_SIGNING_KEY: 'operator key' }, stateDir);
    expect(derived).toEqual({
      API_KEY_PEPPER: expect.any(String),
      SERVICE_TOKEN_CALLER_KEYS: expect.any(String),
    });
    const kept = localSecretSettings({}, stateDir);
    // The service token keys come from the kept pepper, not from the one the environment sets.
    expect(localSecretSettings({ API_KEY_PEPPER: 'p'.repeat(32) }, stateDir)).toEqual({
      SIGNIN_TOKEN_SIGNING_KEY: expect.any(String),
      SIGNIN_TOKEN_SIGNING_KEY_ID: expect.any(String),
      SERVICE_TOKEN_CALLER_KEYS: kept.SERVICE_TOKEN_CALLER_KEYS,
    });
    expect(localSecretSettings({ SERVICE_TOKEN_CALLER_KEYS: 'gateway=…' }, stateDir)).not.toHaveProperty(
      'SERVICE_TOKEN_CALLER_KEYS',
    );
  });

  it('give each calling service a key pair of its own, which the called services accept for it alone', async () => {
    const keys = localServiceTokenKeys(stateDir);
    const settings = (caller: 'gateway' | 'job-orchestrator') =>
      loadConfig(serviceTokenSettings, {
        ...localSecretSettings({}, stateDir),
        SERVICE_TOKEN_PRIVATE_KEY: keys[caller].privateKey,
      });
    const settler = serviceCallers(settings('job-orchestrator'), {
      service: 'payment-settler',
      grpcService: PaymentSettler,
    });
    const call = (caller: string, privateKey: string) =>
      settler({
        method: PaymentSettler.methods[0] as never,
        peer: 'test',
        metadata: {
          get: () => [new ServiceIdentity(caller, privateKey).authorization('payment-settler')],
        } as never,
      });
    expect(await call('job-orchestrator', settings('job-orchestrator').SERVICE_TOKEN_PRIVATE_KEY)).toBe(
      'job-orchestrator',
    );
    await expect(call('job-orchestrator', keys.gateway.privateKey)).rejects.toThrow(
      'signed with a key of gateway, not of job-orchestrator',
    );
  });

  it('give a secrets file written before service tokens existed service token keys', () => {
    const { SIGNIN_TOKEN_SIGNING_KEY, SIGNIN_TOKEN_SIGNING_KEY_ID, API_KEY_PEPPER } = localSecretSettings(
      {},
      stateDir,
    );
    const path = join(stateDir, 'secrets.json');
    const before = JSON.stringify({ SIGNIN_TOKEN_SIGNING_KEY, SIGNIN_TOKEN_SIGNING_KEY_ID, API_KEY_PEPPER });
    writeFileSync(path, before);
    expect(localSecretSettings({}, stateDir).SERVICE_TOKEN_CALLER_KEYS).toMatch(
      /^gateway=.*,job-orchestrator=/,
    );
    expect(readFileSync(path, 'utf8')).toBe(before);
  });

  it('refuse a damaged file with what to do, rather than starting with other secrets', () => {
    localSecretSettings({}, stateDir);
    const path = join(stateDir, 'secrets.json');
    writeFileSync(path, readFileSync(path, 'utf8').slice(0, 40));
    expect(() => localSecretSettings({}, stateDir)).toThrow(/not a secrets file .* --reset/);
    writeFileSync(path, '{"API_KEY_PEPPER": 1}');
    expect(() => localSecretSettings({}, stateDir)).toThrow(/not a secrets file/);
  });
});
