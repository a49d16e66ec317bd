import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import envPaths from 'env-paths';

/** A sign-in token of one wallet at one server. */
export interface SignIn {
  readonly address: string;
  readonly token: string;
  /** ISO timestamp, as `/api/auth/verify` answers it. */
  readonly expiresAt: string;
}

/** An API key kept by `svc keys create --save`, used by `svc chat` when no key is given. */
export interface SavedKey {
  readonly id: string;
  readonly prefix: string;
  readonly key: string;
}

interface CredentialsFile {
  signIns: Record<string, SignIn>;
  keys: Record<string, SavedKey>;
}

/** A token this close to its expiry is treated as expired: a call made with it could outlive it. */
const EXPIRY_MARGIN_MS = 30_000;

/**
 * Credentials per server (keyed by base URL) in `<config dir>/credentials.json`: owner-only (0600, in a
 * 0700 directory) because it holds sign-in tokens and saved keys. The config dir is `SVC_CONFIG_DIR`, else
 * the platform's (`$XDG_CONFIG_HOME/svc`, `~/.config/svc`). Written whole, through a rename.
 */
export class CredentialStore {
  readonly path: string;

  constructor(env: NodeJS.ProcessEnv = process.env) {
    const dir = env.SVC_CONFIG_DIR ?? envPaths('svc', { suffix: '' }).config;
    this.path = join(dir, 'credentials.json');
  }

  /** The sign-in for `baseUrl` while it is still valid; an expired one is undefined. */
  signIn(baseUrl: string, now = Date.now()): SignIn | undefined {
    const signIn = this.read().signIns[baseUrl];
    return signIn && Date.parse(signIn.expiresAt) - EXPIRY_MARGIN_MS > now ? signIn : undefined;
  }

  /** The sign-in for `baseUrl` even when expired (to say when it lapsed). */
  lastSignIn(baseUrl: string): SignIn | undefined {
    return this.read().signIns[baseUrl];
  }

  saveSignIn(baseUrl: string, signIn: SignIn): void {
    this.update((file) => (file.signIns[baseUrl] = signIn));
  }

  /** Forgets the sign-in and the saved key of `baseUrl`; true when there was something to forget. */
  forget(baseUrl: string): boolean {
    let had = false;
    this.update((file) => {
      had = baseUrl in file.signIns || baseUrl in file.keys;
      delete file.signIns[baseUrl];
      delete file.keys[baseUrl];
    });
    return had;
  }

  savedKey(baseUrl: string): SavedKey | undefined {
    return this.read().keys[baseUrl];
  }

  saveKey(baseUrl: string, key: SavedKey): void {
    this.update((file) => (file.keys[baseUrl] = key));
  }

  /** Drops the saved key of `baseUrl` when it is `id` (revoked or deleted). */
  dropKey(baseUrl: string, id: string): void {
    if (this.read().keys[baseUrl]?.id === id) this.update((file) => delete file.keys[baseUrl]);
  }

  private read(): CredentialsFile {
    try {
      const parsed = JSON.parse(readFileSync(this.path, 'utf8')) as Partial<CredentialsFile>;
      return { signIns: parsed.signIns ?? {}, keys: parsed.keys ?? {} };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { signIns: {}, keys: {} };
      throw new Error(`cannot read ${this.path}: ${(error as Error).message}`, { cause: error });
    }
  }

  private update(change: (file: CredentialsFile) => void): void {
    const file = this.read();
    change(file);
    const dir = join(this.path, '..');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
    const partial = `${this.path}.${process.pid}.tmp`;
    writeFileSync(partial, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
    renameSync(partial, this.path);
  }
}
