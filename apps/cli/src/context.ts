import { Wallet } from 'ethers';
import { CredentialStore } from './credentials.js';
import { EXIT, CliError, usageError } from './errors.js';
import { Output } from './output.js';
import { readLocalStack, type LocalStack } from './stack-file.js';
import type { WalletSource } from './wallet.js';

/** The options every command takes. */
export interface GlobalOptions {
  readonly baseUrl?: string;
  readonly rpcUrl?: string;
  readonly json?: boolean;
}

/** What a command runs with: where the service is, how to print, and where credentials are kept. */
export class CommandContext {
  private constructor(
    readonly baseUrl: string,
    readonly output: Output,
    readonly credentials: CredentialStore,
    readonly env: NodeJS.ProcessEnv,
    private readonly options: GlobalOptions,
    private readonly localStack: LocalStack | undefined,
  ) {}

  /** The base URL: --base-url, else SVC_BASE_URL, else the gateway of `npm start`'s `.dev/stack.json`. */
  static create(options: GlobalOptions, env: NodeJS.ProcessEnv = process.env): CommandContext {
    const output = new Output(options.json ?? false);
    const localStack = readLocalStack(env);
    const configured = options.baseUrl ?? env.SVC_BASE_URL ?? localStack?.gatewayUrl;
    if (!configured)
      throw usageError('no service to talk to: pass --base-url, set SVC_BASE_URL, or run `npm start` here');
    let baseUrl: string;
    try {
      const url = new URL(configured);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error('not http(s)');
      baseUrl = url.href.replace(/\/+$/, '');
    } catch {
      throw usageError(`base URL "${configured}" is not an http(s) URL`);
    }
    return new CommandContext(baseUrl, output, new CredentialStore(env), env, options, localStack);
  }

  /** `npm start`'s stack when it is the service this command talks to. */
  get stack(): LocalStack | undefined {
    return this.localStack && sameOrigin(this.localStack.gatewayUrl, this.baseUrl)
      ? this.localStack
      : undefined;
  }

  /** The chain's JSON-RPC URL: --rpc-url, else SVC_RPC_URL, else the local stack's. */
  rpcUrl(): string {
    const rpcUrl = this.options.rpcUrl ?? this.env.SVC_RPC_URL ?? this.stack?.rpcUrl;
    if (!rpcUrl) throw usageError('no chain to read: pass --rpc-url or set SVC_RPC_URL');
    return rpcUrl;
  }

  /** Where commands take the wallet from: prompts only at a terminal and never with --json. */
  get walletSource(): WalletSource {
    return { env: this.env, canPrompt: !this.output.json && Boolean(process.stdin.isTTY) };
  }

  /**
   * The wallet `SVC_PRIVATE_KEY` names, by address: its sign-in and saved key are the ones used. Unset,
   * the wallet signed in last is.
   */
  get namedWallet(): string | undefined {
    const key = this.env.SVC_PRIVATE_KEY?.trim();
    if (!key) return undefined;
    try {
      return new Wallet(key.startsWith('0x') ? key : `0x${key}`).address;
    } catch {
      throw usageError('SVC_PRIVATE_KEY is not a private key (32 bytes of hex)');
    }
  }

  /** The wallet's sign-in token, or a credentials error saying how to get one. */
  signInToken(): { token: string; address: string } {
    const wallet = this.namedWallet;
    const signIn = this.credentials.signIn(this.baseUrl, wallet);
    if (signIn) return signIn;
    const lapsed = this.credentials.lastSignIn(this.baseUrl, wallet);
    const message = lapsed
      ? `the sign-in of ${lapsed.address} at ${this.baseUrl} expired at ${lapsed.expiresAt}`
      : `${wallet ? `${wallet} is ` : ''}not signed in at ${this.baseUrl}`;
    throw new CliError(message, EXIT.credentials, { code: 'unauthorized', command: 'svc login' });
  }
}

function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch {
    return false;
  }
}
