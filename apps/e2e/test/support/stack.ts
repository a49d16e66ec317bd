import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Signer } from 'ethers';

// Shared support of the end-to-end suites: `npm start` in its own process (the real start script,
// nothing configured but what a suite passes), the files it writes, and the wallet sign-in.

export const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));

/** `<STATE_DIR>/devnet.json`, as far as the suites read it. */
export interface DevnetFile {
  rpcUrl: string;
  chainId: number;
  anvilPid: number;
  contracts: { jobRegistry: string; workerRegistry: string };
  models: Array<{ name: string; feeWei: string }>;
  accounts: Array<{ role: string; address: string }>;
}

export type { StackFile } from '@svc/server/stack-file-format';

/** One JSON-RPC call to the devnet; resolves with its `result`. */
export async function rpc(rpcUrl: string, method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await response.json()) as { result?: unknown }).result;
}

/** One `npm start` process; `stop` sends SIGTERM and resolves with its exit code. */
export class Stack {
  private output = '';
  private stdoutText = '';
  private constructor(private readonly child: ChildProcess) {
    child.stdout?.on('data', (chunk: Buffer) => {
      this.output += chunk.toString();
      this.stdoutText += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
  }

  /**
   * Runs `node scripts/start.mjs ...args` with only PATH, HOME, LOG_LEVEL=info and `env`, and resolves
   * once it logs `"msg":"all started"` (throws with its output when it exits or takes longer than
   * `timeoutMs`).
   */
  static async start(
    env: Record<string, string>,
    args: string[] = [],
    options: { timeoutMs?: number; viaNpm?: boolean } = {},
  ): Promise<Stack> {
    const timeoutMs = options.timeoutMs ?? 110_000;
    // Via npm: `npm start` itself (its pre-script skipped), in a process group of its own as a terminal
    // runs it, so `interrupt` can send what Ctrl-C sends.
    const [command, commandArgs] = options.viaNpm
      ? ['npm', ['start', '--ignore-scripts', '--', ...args]]
      : [process.execPath, ['scripts/start.mjs', ...args]];
    const stack = new Stack(
      spawn(command, commandArgs, {
        cwd: repoRoot,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'info', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: options.viaNpm ?? false,
      }),
    );
    const deadline = Date.now() + timeoutMs;
    while (!stack.output.includes('"msg":"all started"')) {
      if (stack.child.exitCode !== null) throw new Error(`npm start exited early:\n${stack.output}`);
      if (Date.now() > deadline) {
        stack.kill();
        throw new Error(`npm start did not start in time:\n${stack.output}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return stack;
  }

  /** Everything the process wrote so far, stdout and stderr. */
  get logs(): string {
    return this.output;
  }

  /** What it wrote to stdout alone. */
  get stdout(): string {
    return this.stdoutText;
  }

  /** The process id of `scripts/start.mjs` (the launcher). */
  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** What Ctrl-C at a terminal does: SIGINT to the whole foreground process group (npm, the launcher). */
  async interrupt(): Promise<number | null> {
    if (!this.running) return this.child.exitCode;
    const exited = new Promise<number | null>((resolve) => this.child.once('exit', (code) => resolve(code)));
    process.kill(-this.child.pid!, 'SIGINT');
    return exited;
  }

  async stop(): Promise<number | null> {
    if (!this.running) return this.child.exitCode;
    const exited = new Promise<number | null>((resolve) => this.child.once('exit', (code) => resolve(code)));
    this.child.kill('SIGTERM');
    return exited;
  }

  /** Stops as `stop` does, and kills everything if that takes longer than `graceMs` (test teardown). */
  async stopWithin(graceMs: number): Promise<void> {
    const timer = setTimeout(() => this.kill(), graceMs);
    try {
      await this.stop();
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Kills the launcher and everything under it at once: the server runs in a process group of its own
   * (so a terminal's Ctrl-C reaches only the launcher), which a signal to the launcher alone would orphan.
   */
  kill(): void {
    if (!this.running) return;
    for (const pid of [...descendantsOf(this.child.pid!), this.child.pid!]) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
  }
}

/** Every process below `pid` (children first found, then theirs), from `pgrep -P`. */
function descendantsOf(pid: number): number[] {
  let children: number[];
  try {
    children = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' })
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return []; // pgrep exits 1 when there are none
  }
  return children.flatMap((child) => [child, ...descendantsOf(child)]);
}

/** What `POST /api/auth/verify` answers, and the `message` the wallet signed. */
export interface SignIn {
  token: string;
  expiresAt: string;
  address: string;
  message: string;
}

/**
 * Signs `wallet` in to the gateway at `base` (`GET /api/auth/challenge`, `personal_sign` of the
 * message, `POST /api/auth/verify`); throws when either step is not answered 200.
 */
export async function signIn(base: string, wallet: Signer): Promise<SignIn> {
  const address = await wallet.getAddress();
  const challenge = await fetch(`${base}/api/auth/challenge?address=${address}`);
  if (challenge.status !== 200)
    throw new Error(`challenge answered ${challenge.status}: ${await challenge.text()}`);
  const { message } = (await challenge.json()) as { message: string };
  const verify = await fetch(`${base}/api/auth/verify`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ message, signature: await wallet.signMessage(message) }),
  });
  if (verify.status !== 200) throw new Error(`verify answered ${verify.status}: ${await verify.text()}`);
  return { ...((await verify.json()) as Omit<SignIn, 'message'>), message };
}

/** `POST /api/api-keys` with a sign-in token; resolves with the full key (throws unless 201). */
export async function mintKey(
  base: string,
  token: string,
  body: { name?: string; spendCapWei?: string | null } = {},
): Promise<string> {
  const mint = await fetch(`${base}/api/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (mint.status !== 201) throw new Error(`mint answered ${mint.status}: ${await mint.text()}`);
  return ((await mint.json()) as { key: string }).key;
}
