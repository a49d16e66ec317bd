import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { CredentialStore, type SavedKey, type SignIn } from '../src/credentials.js';

const LOCAL = 'http://127.0.0.1:8080';
const OTHER = 'https://svc.example';
const ALICE = '0x00000000000000000000000000000000000000A1';
const BOB = '0x00000000000000000000000000000000000000B2';
const HOUR = 3_600_000;

let root: string;
let configDir: string;
let store: CredentialStore;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'svc-credentials-'));
  configDir = join(root, 'config', 'svc');
  store = new CredentialStore({ SVC_CONFIG_DIR: configDir });
});

afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

function signIn(expiresAt: number, address = ALICE): SignIn {
  return { address, token: `token-${address}-${expiresAt}`, expiresAt: new Date(expiresAt).toISOString() };
}

function key(id: string): SavedKey {
  return { id, prefix: `sk-${id}`, key: `sk-${id}-secret` };
}

describe('CredentialStore', () => {
  it('keeps credentials.json in SVC_CONFIG_DIR, and reads nothing before the first write', () => {
    expect(store.path).toBe(join(configDir, 'credentials.json'));
    expect(store.signIn(LOCAL)).toBeUndefined();
    expect(store.lastSignIn(LOCAL)).toBeUndefined();
    expect(store.savedKey(LOCAL)).toBeUndefined();
    expect(store.savedKey(LOCAL, ALICE)).toBeUndefined();
    expect(() => statSync(configDir)).toThrow();
  });

  it('writes an owner-only file in an owner-only directory, through a rename', () => {
    store.saveSignIn(LOCAL, signIn(Date.now() + HOUR));
    expect(statSync(configDir).mode & 0o777).toBe(0o700);
    expect(statSync(store.path).mode & 0o777).toBe(0o600);
    expect(readdirSync(configDir)).toEqual(['credentials.json']);
  });

  it('leaves an existing directory as its owner set it (SVC_CONFIG_DIR may be any directory), the file owner-only', () => {
    mkdirSync(configDir, { recursive: true });
    chmodSync(configDir, 0o755);
    store.saveKey(LOCAL, ALICE, key('k1'));
    expect(statSync(configDir).mode & 0o777).toBe(0o755);
    expect(statSync(store.path).mode & 0o777).toBe(0o600);
  });

  it('keeps a sign-in per base URL, readable by another store on the same directory', () => {
    const valid = signIn(Date.now() + HOUR);
    store.saveSignIn(LOCAL, valid);
    expect(store.signIn(LOCAL)).toEqual(valid);
    expect(store.signIn(LOCAL, ALICE)).toEqual(valid);
    expect(store.signIn(OTHER)).toBeUndefined();
    expect(store.signIn(OTHER, ALICE)).toBeUndefined();
    expect(new CredentialStore({ SVC_CONFIG_DIR: configDir }).signIn(LOCAL)).toEqual(valid);
    expect(readFileSync(store.path, 'utf8')).toContain(valid.token);
  });

  it('treats a token within 30 s of its expiry as expired, and still tells when it lapsed', () => {
    const expiresAt = Date.parse('2030-01-01T00:00:00.000Z');
    const lapsing = signIn(expiresAt);
    store.saveSignIn(LOCAL, lapsing);
    expect(store.signIn(LOCAL, undefined, expiresAt - 31_000)).toEqual(lapsing);
    expect(store.signIn(LOCAL, undefined, expiresAt - 30_000)).toBeUndefined();
    expect(store.signIn(LOCAL, undefined, expiresAt - 29_000)).toBeUndefined();
    expect(store.signIn(LOCAL, ALICE, expiresAt + HOUR)).toBeUndefined();

    const expired = signIn(Date.now() - HOUR);
    store.saveSignIn(LOCAL, expired);
    expect(store.signIn(LOCAL)).toBeUndefined();
    expect(store.lastSignIn(LOCAL)).toEqual(expired);
    expect(store.lastSignIn(LOCAL, ALICE)).toEqual(expired);
  });

  it('keeps each wallet apart: the one signed in last is used when none is named, in any case', () => {
    const alice = signIn(Date.now() + HOUR, ALICE);
    const bob = signIn(Date.now() + HOUR, BOB);
    store.saveSignIn(LOCAL, alice);
    store.saveSignIn(LOCAL, bob);
    expect(store.signIn(LOCAL)).toEqual(bob);
    expect(store.signIn(LOCAL, ALICE.toLowerCase())).toEqual(alice);
    expect(store.signIn(LOCAL, BOB)).toEqual(bob);

    store.saveKey(LOCAL, ALICE, key('ka'));
    expect(store.savedKey(LOCAL)).toBeUndefined();
    expect(store.savedKey(LOCAL, ALICE.toLowerCase())).toEqual(key('ka'));
    store.saveKey(LOCAL, BOB, key('kb'));
    expect(store.savedKey(LOCAL)).toEqual(key('kb'));
    store.saveKey(LOCAL, BOB, key('kc'));
    expect(store.savedKey(LOCAL, BOB)).toEqual(key('kc'));
  });

  it("forgets one wallet's sign-in and saved key at one base URL only", () => {
    store.saveSignIn(LOCAL, signIn(Date.now() + HOUR, ALICE));
    store.saveKey(LOCAL, ALICE, key('k1'));
    const bob = signIn(Date.now() + HOUR, BOB);
    store.saveSignIn(LOCAL, bob);
    store.saveKey(LOCAL, BOB, key('k2'));
    const other = signIn(Date.now() + HOUR, ALICE);
    store.saveSignIn(OTHER, other);
    store.saveKey(OTHER, ALICE, key('k3'));

    expect(store.forget(LOCAL, ALICE)).toBe(true);
    expect(store.lastSignIn(LOCAL, ALICE)).toBeUndefined();
    expect(store.savedKey(LOCAL, ALICE)).toBeUndefined();
    expect(store.signIn(LOCAL)).toEqual(bob);
    expect(store.savedKey(LOCAL, BOB)).toEqual(key('k2'));
    expect(store.signIn(OTHER, ALICE)).toEqual(other);
    expect(store.savedKey(OTHER, ALICE)).toEqual(key('k3'));
    expect(store.forget(LOCAL, ALICE)).toBe(false);

    // None named: the wallet signed in last.
    expect(store.forget(LOCAL)).toBe(true);
    expect(store.lastSignIn(LOCAL, BOB)).toBeUndefined();
    expect(store.savedKey(LOCAL, BOB)).toBeUndefined();
    expect(store.forget(LOCAL)).toBe(false);
    expect(store.signIn(OTHER)).toEqual(other);
  });

  it('drops a saved key only when it is the key revoked', () => {
    store.saveKey(LOCAL, ALICE, key('k1'));
    store.saveKey(LOCAL, BOB, key('k2'));
    store.saveKey(OTHER, ALICE, key('k1'));
    store.dropKey(LOCAL, 'k9');
    expect(store.savedKey(LOCAL, ALICE)).toEqual(key('k1'));
    expect(store.savedKey(LOCAL, BOB)).toEqual(key('k2'));
    store.dropKey(LOCAL, 'k1');
    expect(store.savedKey(LOCAL, ALICE)).toBeUndefined();
    expect(store.savedKey(LOCAL, BOB)).toEqual(key('k2'));
    expect(store.savedKey(OTHER, ALICE)).toEqual(key('k1'));
  });

  it('refuses a damaged file, naming it, rather than overwriting it', () => {
    mkdirSync(configDir, { recursive: true });
    writeFileSync(store.path, '{"signIns": ');
    expect(() => store.signIn(LOCAL)).toThrow(`cannot read ${store.path}`);
    expect(() => store.saveSignIn(LOCAL, signIn(Date.now() + HOUR))).toThrow(/cannot read/);
    expect(readFileSync(store.path, 'utf8')).toBe('{"signIns": ');
  });
});
