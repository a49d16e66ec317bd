import { createCipheriv, createDecipheriv, randomBytes, scrypt as scryptCallback } from 'node:crypto';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { SessionKeyPair } from '@svc/chain';
import { listFiles, readFileIfExists, removeFile, writeFileDurably } from '../storage/durable-file.js';

const scrypt = promisify(scryptCallback) as (
  password: string,
  salt: Buffer,
  keyLength: number,
  options: { N: number; r: number; p: number; maxmem: number },
) => Promise<Buffer>;

const KEY_FILE_SUFFIX = '.session-key.json';
const SALT_FILE = 'vault-salt';
const VAULT_LABEL = 'svc/worker/session-key/v1';
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

interface SealedSessionKey {
  v: 1;
  sessionId: string;
  /** base64 of nonce ‖ ciphertext ‖ tag. */
  sealed: string;
}

export interface SessionKeyVaultOptions {
  /** Directory of the vault (one file per session, plus the salt). */
  readonly directory: string;
  /** The worker keystore's password; the vault key is derived from it with scrypt. */
  readonly password: string;
  /** scrypt cost (a power of two); tests lower it. Default 2^15. */
  readonly scryptN?: number;
}

/**
 * The worker's per-session P-256 private keys, kept encrypted at rest (AES-256-GCM, key derived
 * from the keystore password) so a restart can still open its sessions' prompts, and deleted when
 * the session closes so a later leak exposes no old prompt.
 */
export class SessionKeyVault {
  readonly #directory: string;
  readonly #key: Buffer;
  readonly #cache = new Map<string, SessionKeyPair>();

  private constructor(directory: string, key: Buffer) {
    this.#directory = directory;
    this.#key = key;
  }

  static async open(options: SessionKeyVaultOptions): Promise<SessionKeyVault> {
    if (!options.password) throw new RangeError('the session key vault needs a password');
    const saltPath = join(options.directory, SALT_FILE);
    let saltHex = await readFileIfExists(saltPath);
    if (saltHex === undefined) {
      saltHex = randomBytes(16).toString('hex');
      await writeFileDurably(saltPath, saltHex);
    }
    const N = options.scryptN ?? 1 << 15;
    const key = await scrypt(options.password, Buffer.from(saltHex.trim(), 'hex'), 32, {
      N,
      r: 8,
      p: 1,
      maxmem: 256 * N * 8,
    });
    return new SessionKeyVault(options.directory, key);
  }

  /** Stores a session's key durably; call before its public key goes on chain. */
  async put(sessionId: bigint, keyPair: SessionKeyPair): Promise<void> {
    const id = sessionId.toString();
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, nonce);
    cipher.setAAD(aadOf(id));
    const ciphertext = Buffer.concat([cipher.update(keyPair.exportPrivateKey()), cipher.final()]);
    const record: SealedSessionKey = {
      v: 1,
      sessionId: id,
      sealed: Buffer.concat([nonce, ciphertext, cipher.getAuthTag()]).toString('base64'),
    };
    await writeFileDurably(this.#pathOf(id), JSON.stringify(record));
    this.#cache.set(id, keyPair);
  }

  async get(sessionId: bigint): Promise<SessionKeyPair | undefined> {
    const id = sessionId.toString();
    const cached = this.#cache.get(id);
    if (cached) return cached;
    const json = await readFileIfExists(this.#pathOf(id));
    if (json === undefined) return undefined;
    const record = JSON.parse(json) as SealedSessionKey;
    const sealed = Buffer.from(record.sealed, 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.#key, sealed.subarray(0, NONCE_BYTES));
    decipher.setAAD(aadOf(id));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    const privateKey = Buffer.concat([
      decipher.update(sealed.subarray(NONCE_BYTES, sealed.length - TAG_BYTES)),
      decipher.final(),
    ]);
    const keyPair = SessionKeyPair.fromPrivateKey(privateKey);
    privateKey.fill(0);
    this.#cache.set(id, keyPair);
    return keyPair;
  }

  /** Forgets a session's key for good (the session closed, or its claim failed). */
  async forget(sessionId: bigint): Promise<void> {
    const id = sessionId.toString();
    this.#cache.delete(id);
    await removeFile(this.#pathOf(id));
  }

  /** Sessions whose keys are held: the sessions this worker has claimed and not yet seen closed. */
  async sessionIds(): Promise<bigint[]> {
    const names = await listFiles(this.#directory, KEY_FILE_SUFFIX);
    return names
      .map((name) => BigInt(name.slice(0, -KEY_FILE_SUFFIX.length)))
      .sort((a, b) => (a < b ? -1 : 1));
  }

  #pathOf(id: string): string {
    return join(this.#directory, `${id}${KEY_FILE_SUFFIX}`);
  }
}

function aadOf(sessionId: string): Buffer {
  // Binds a sealed key to its session: a file copied under another session's name does not open.
  return Buffer.from(`${VAULT_LABEL}:${sessionId}`, 'utf8');
}
