import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { encryptKeystoreJsonSync, Wallet } from 'ethers';
import { CliError, EXIT } from '../src/errors.js';
import { loadWallet } from '../src/wallet.js';

// The wallet sources in their order: --keystore (with SVC_KEYSTORE_PASSWORD), then SVC_PRIVATE_KEY. With
// neither and prompts not allowed (no terminal, or --json) nothing is asked: a usage error, not a hang.
/** The environment given, with prompts ruled out even when the test runs at a terminal. */
const source = (env: NodeJS.ProcessEnv) => ({ env, canPrompt: false });

describe('loadWallet', () => {
  const wallet = Wallet.createRandom();
  let dir: string;
  let keystore: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-wallet-'));
    keystore = join(dir, 'keystore.json');
    // A cheap scrypt: the format is what matters here, not its cost.
    writeFileSync(
      keystore,
      encryptKeystoreJsonSync({ address: wallet.address, privateKey: wallet.privateKey }, 'correct horse', {
        scrypt: { N: 1 << 4 },
      }),
    );
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('takes SVC_PRIVATE_KEY, with or without 0x; an explicit --keystore wins over it', async () => {
    const fromKey = await loadWallet({}, source({ SVC_PRIVATE_KEY: wallet.privateKey.slice(2) }));
    expect(fromKey.address).toBe(wallet.address);
    const other = Wallet.createRandom();
    const fromFlag = await loadWallet(
      { keystore },
      source({ SVC_PRIVATE_KEY: other.privateKey, SVC_KEYSTORE_PASSWORD: 'correct horse' }),
    );
    expect(fromFlag.address).toBe(wallet.address);
  });

  it('opens an encrypted JSON keystore with SVC_KEYSTORE_PASSWORD', async () => {
    const opened = await loadWallet({ keystore }, source({ SVC_KEYSTORE_PASSWORD: 'correct horse' }));
    expect(opened.address).toBe(wallet.address);
    expect(opened.privateKey).toBe(wallet.privateKey);
  });

  it('refuses a wrong password, an unreadable file and a malformed key as usage errors (exit 2)', async () => {
    const refusals = await Promise.all([
      loadWallet({ keystore }, source({ SVC_KEYSTORE_PASSWORD: 'wrong' })).catch((error: unknown) => error),
      loadWallet({ keystore: join(dir, 'missing.json') }, source({ SVC_KEYSTORE_PASSWORD: 'x' })).catch(
        (error: unknown) => error,
      ),
      loadWallet({}, source({ SVC_PRIVATE_KEY: '0x1234' })).catch((error: unknown) => error),
    ]);
    for (const refusal of refusals) {
      expect(refusal).toBeInstanceOf(CliError);
      expect((refusal as CliError).exitCode).toBe(EXIT.usage);
    }
    expect((refusals[0] as CliError).message).toMatch(/^cannot open the keystore .*keystore\.json/);
    expect((refusals[2] as CliError).message).toBe('SVC_PRIVATE_KEY is not a private key (32 bytes of hex)');
  });

  it('does not wait for a prompt when there is no terminal to ask on', async () => {
    const refusal = await loadWallet({}, source({})).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(CliError);
    expect((refusal as CliError).message).toMatch(
      /nothing to ask on \(no terminal, or --json\): set SVC_PRIVATE_KEY or pass --keystore/,
    );
    const noPassword = await loadWallet({ keystore }, source({})).catch((error: unknown) => error);
    expect((noPassword as CliError).message).toMatch(/set SVC_KEYSTORE_PASSWORD/);
  });
});
