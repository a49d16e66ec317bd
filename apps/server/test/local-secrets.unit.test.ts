import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { localSecretSettings } from '../src/local-secrets.js';

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
    expect(first.SERVICE_TOKEN_SECRET).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(first.SERVICE_TOKEN_SECRET).not.toBe(first.API_KEY_PEPPER);
    expect(statSync(join(stateDir, 'secrets.json')).mode & 0o777).toBe(0o600);
    expect(localSecretSettings({}, stateDir)).toEqual(first);
  });

  it("yield to the environment's: the signing key only together with its id", () => {
    const derived = localSecretSettings({ SIGNIN_TOKEN_SIGNING_KEY: 'operator key' }, stateDir);
    expect(derived).toEqual({ API_KEY_PEPPER: expect.any(String), SERVICE_TOKEN_SECRET: expect.any(String) });
    const kept = localSecretSettings({}, stateDir);
    // The service token secret comes from the kept pepper, not from the one the environment sets.
    expect(localSecretSettings({ API_KEY_PEPPER: 'p'.repeat(32) }, stateDir)).toEqual({
      SIGNIN_TOKEN_SIGNING_KEY: expect.any(String),
      SIGNIN_TOKEN_SIGNING_KEY_ID: expect.any(String),
      SERVICE_TOKEN_SECRET: kept.SERVICE_TOKEN_SECRET,
    });
    expect(localSecretSettings({ SERVICE_TOKEN_SECRET: 's'.repeat(32) }, stateDir)).not.toHaveProperty(
      'SERVICE_TOKEN_SECRET',
    );
  });

  it('give a secrets file written before service tokens existed a service token secret', () => {
    const { SIGNIN_TOKEN_SIGNING_KEY, SIGNIN_TOKEN_SIGNING_KEY_ID, API_KEY_PEPPER } = localSecretSettings(
      {},
      stateDir,
    );
    const path = join(stateDir, 'secrets.json');
    const before = JSON.stringify({ SIGNIN_TOKEN_SIGNING_KEY, SIGNIN_TOKEN_SIGNING_KEY_ID, API_KEY_PEPPER });
    writeFileSync(path, before);
    expect(localSecretSettings({}, stateDir).SERVICE_TOKEN_SECRET).toMatch(/^[A-Za-z0-9_-]{43}$/);
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
