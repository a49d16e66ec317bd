import { randomUUID } from 'node:crypto';
import { link, mkdir, readFile, unlink, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Wallet, encryptKeystoreJson, type KeystoreAccount } from 'ethers';

export interface WorkerKeystoreOptions {
  /** Path of the encrypted JSON keystore (ethers / geth format). */
  readonly path: string;
  /** Decrypts the keystore; never logged. */
  readonly password: string;
  /**
   * scrypt cost of a newly created keystore (a power of two). The default is ethers' own (2^17);
   * tests lower it because every decryption pays it.
   */
  readonly scryptN?: number;
}

export interface WorkerKey {
  readonly wallet: Wallet;
  /** True when this start created the key (the operator must fund its address). */
  readonly created: boolean;
}

/**
 * Loads the worker's Ethereum key from its encrypted keystore, or creates one when the file does not
 * exist. Creation is exclusive (`wx`), so two processes starting on the same path end up with the
 * same key; a wrong password fails loudly instead of silently making a second identity.
 */
export async function loadOrCreateWorkerKey(options: WorkerKeystoreOptions): Promise<WorkerKey> {
  if (!options.password) throw new RangeError('the worker keystore needs a password');
  const existing = await readKeystore(options.path);
  if (existing !== undefined) {
    return { wallet: await decryptKeystore(existing, options.password, options.path), created: false };
  }
  const fresh = Wallet.createRandom();
  const account: KeystoreAccount = { address: fresh.address, privateKey: fresh.privateKey };
  const json = await encryptKeystoreJson(
    account,
    options.password,
    options.scryptN ? { scrypt: { N: options.scryptN } } : {},
  );
  await mkdir(dirname(options.path), { recursive: true, mode: 0o700 });
  const staged = `${options.path}.${process.pid}.${randomUUID()}.tmp`;
  await writeFile(staged, json, { mode: 0o600 });
  try {
    // A hard link publishes the complete file at once and fails if the path exists, so the first
    // process to publish its key wins and every other one loads that key.
    await link(staged, options.path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const winner = await readFile(options.path, 'utf8');
    return { wallet: await decryptKeystore(winner, options.password, options.path), created: false };
  } finally {
    await unlink(staged);
  }
  return { wallet: new Wallet(fresh.privateKey), created: true };
}

async function readKeystore(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

async function decryptKeystore(json: string, password: string, path: string): Promise<Wallet> {
  try {
    const wallet = await Wallet.fromEncryptedJson(json, password);
    return new Wallet(wallet.privateKey);
  } catch (error) {
    throw new WorkerKeystoreError(`the worker keystore at ${path} could not be decrypted (wrong password?)`, {
      cause: error,
    });
  }
}

export class WorkerKeystoreError extends Error {
  override readonly name = 'WorkerKeystoreError';
}
