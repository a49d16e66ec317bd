import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import envPaths from 'env-paths';
import { isRecord } from '@svc/api';

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

/** What is kept for one server (keyed by base URL): each wallet's sign-in and saved key. */
interface ServerCredentials {
  /** The wallet signed in last: the one used when no wallet is named. */
  current?: string;
  signIns: Record<string, SignIn>;
  keys: Record<string, SavedKey>;
}

type CredentialsFile = Record<string, ServerCredentials>;

/** A token this close to its expiry is treated as expired: a call made with it could outlive it. */
const EXPIRY_MARGIN_MS = 30_000;

/**
 * Credentials per server and wallet in `<config dir>/credentials.json`: owner-only (0600, in a 0700
 * directory) because it holds sign-in tokens and saved keys. The config dir is `SVC_CONFIG_DIR`, else the
 * platform's (`$XDG_CONFIG_HOME/svc`, `~/.config/svc`). Written whole, through a rename. A wallet is named
 * by address; none named means the wallet signed in last at that server.
 */
export class CredentialStore {
  readonly path: string;

  constructor(env: NodeJS.ProcessEnv = process.env) {
    const dir = env.SVC_CONFIG_DIR ?? envPaths('svc', { suffix: '' }).config;
    this.path = join(dir, 'credentials.json');
  }

  /** The wallet's sign-in at `baseUrl` while it is valid; an expired one is undefined. */
  signIn(baseUrl: string, address?: string, now = Date.now()): SignIn | undefined {
    const signIn = this.lastSignIn(baseUrl, address);
    return signIn && Date.parse(signIn.expiresAt) - EXPIRY_MARGIN_MS > now ? signIn : undefined;
  }

  /** The wallet's sign-in even when expired (to say when it lapsed). */
  lastSignIn(baseUrl: string, address?: string): SignIn | undefined {
    const server = this.read()[baseUrl];
    const wallet = walletOf(server, address);
    return wallet ? server?.signIns[wallet] : undefined;
  }

  /** Keeps a sign-in; its wallet becomes the one used when none is named. */
  saveSignIn(baseUrl: string, signIn: SignIn): void {
    this.update(baseUrl, (server) => {
      const wallet = signIn.address.toLowerCase();
      server.signIns[wallet] = signIn;
      server.current = wallet;
    });
  }

  /** Forgets the wallet's sign-in and saved key at `baseUrl`; true when there was something to forget. */
  forget(baseUrl: string, address?: string): boolean {
    const kept = this.read()[baseUrl];
    const wallet = walletOf(kept, address);
    if (!kept || !wallet || !(wallet in kept.signIns || wallet in kept.keys || kept.current === wallet))
      return false;
    this.update(baseUrl, (server) => {
      delete server.signIns[wallet];
      delete server.keys[wallet];
      if (server.current === wallet) delete server.current;
    });
    return true;
  }

  savedKey(baseUrl: string, address?: string): SavedKey | undefined {
    const server = this.read()[baseUrl];
    const wallet = walletOf(server, address);
    return wallet ? server?.keys[wallet] : undefined;
  }

  saveKey(baseUrl: string, address: string, key: SavedKey): void {
    this.update(baseUrl, (server) => (server.keys[address.toLowerCase()] = key));
  }

  /** Drops a saved key that is `id` (revoked or deleted), whichever wallet kept it. */
  dropKey(baseUrl: string, id: string): void {
    const server = this.read()[baseUrl];
    if (!server || !Object.values(server.keys).some((key) => key.id === id)) return;
    this.update(baseUrl, (kept) => {
      for (const [wallet, key] of Object.entries(kept.keys)) if (key.id === id) delete kept.keys[wallet];
    });
  }

  /** The file's servers; an entry of another shape is left out (and dropped at the next write). */
  private read(): CredentialsFile {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(this.path, 'utf8'));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw new Error(`cannot read ${this.path}: ${(error as Error).message}`, { cause: error });
    }
    if (!isRecord(parsed))
      throw new Error(`cannot read ${this.path}: not a JSON object; remove it and sign in again`);
    return Object.fromEntries(
      Object.entries(parsed).filter(
        (entry): entry is [string, ServerCredentials] =>
          isRecord(entry[1]) && isRecord(entry[1].signIns) && isRecord(entry[1].keys),
      ),
    );
  }

  private update(baseUrl: string, change: (server: ServerCredentials) => void): void {
    const file = this.read();
    const server = (file[baseUrl] ??= { signIns: {}, keys: {} });
    change(server);
    const dir = join(this.path, '..');
    // A directory made here is the owner's only; one that exists is left as its owner set it.
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const partial = `${this.path}.${process.pid}.tmp`;
    writeFileSync(partial, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
    renameSync(partial, this.path);
  }
}

/** The wallet meant: the one named (any case), else the one signed in last. */
function walletOf(server: ServerCredentials | undefined, address: string | undefined): string | undefined {
  return address ? address.toLowerCase() : server?.current;
}
