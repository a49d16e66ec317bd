// Loaded by every run, `--help` included: commander, the exit codes and the output. A command's module,
// and ethers, openai or ora with it, is imported only when that command runs.
import { Command, CommanderError, Option } from 'commander';
import type { ChainOptions } from './commands/funds.js';
import type { ChatOptions } from './commands/chat.js';
import type { PayOptions } from './commands/pay.js';
import type { UsageOptions } from './commands/usage.js';
import type { CommandContext, GlobalOptions } from './context.js';
import { EXIT, CliError, type ExitCode } from './errors.js';
import { Output } from './output.js';

// Each command's module, imported when it runs.
const loginCommands = () => import('./commands/login.js');
const keyCommands = () => import('./commands/keys.js');
const funds = () => import('./commands/funds.js');
const chatCommands = () => import('./commands/chat.js');
const payCommand = () => import('./commands/pay.js');
const usageCommand = () => import('./commands/usage.js');

const EXIT_CODES_HELP = `
Exit codes:
  0  done
  1  failed: the network, the server (5xx) or the chain
  2  usage: bad arguments or options
  3  credentials: not signed in, sign-in expired, or the API key refused (401)
  4  payment needed (402): the error says what to send
  5  refused: another 4xx (400, 404, 409, 429)
  6  declined at the confirmation prompt

Environment: SVC_BASE_URL, SVC_RPC_URL, SVC_PRIVATE_KEY, SVC_KEYSTORE_PASSWORD, SVC_API_KEY,
SVC_JOB_REGISTRY, SVC_DELEGATE, SVC_CONFIG_DIR. Without a base URL, svc talks to the service
\`npm start\` runs in this checkout (.dev/stack.json).`;

/**
 * The `svc` command line. `run` resolves with the exit code; nothing here calls process.exit, so the
 * program can be driven in-process.
 */
export function buildProgram(
  env: NodeJS.ProcessEnv = process.env,
  /** Whether --json was asked for: commander's own usage errors then come as a JSON document too. */
  json = false,
): {
  program: Command;
  exitCode: () => ExitCode;
} {
  let exitCode: ExitCode = EXIT.ok;
  const program = new Command('svc')
    .description(
      'Sign in with a wallet, manage API keys, fund the wallet, chat, pay per call, and see the usage.',
    )
    .option('--base-url <url>', 'the service (else SVC_BASE_URL, else .dev/stack.json)')
    .option(
      '--rpc-url <url>',
      'the chain, for balance, deposit and authorize (else SVC_RPC_URL, else .dev/stack.json)',
    )
    .option('--json', 'print one JSON document (results and errors) for scripts')
    .addHelpText('after', EXIT_CODES_HELP)
    .showHelpAfterError(json ? false : '(svc --help lists the commands)')
    .exitOverride()
    .configureOutput({
      outputError: (text, write) => {
        const message = text.replace(/^error: /, '').trim();
        if (json) new Output(true).error(new CliError(message, EXIT.usage, { code: 'usage' }));
        else write(`svc: ${message}\n`);
      },
    });

  /** Runs a command's action with its context; a failure is printed once and becomes the exit code. */
  const action =
    <A extends unknown[]>(handler: (context: CommandContext, ...args: A) => Promise<void> | void) =>
    async (...args: A) => {
      const globals = program.opts<GlobalOptions>();
      let output = new Output(globals.json ?? false);
      try {
        const { CommandContext } = await import('./context.js');
        const context = CommandContext.create(globals, env);
        output = context.output;
        await handler(context, ...args);
      } catch (error) {
        const failure =
          error instanceof CliError
            ? error
            : new CliError((error as Error).message ?? String(error), EXIT.failed, {}, { cause: error });
        output.error(failure);
        exitCode = failure.exitCode;
      }
    };
  const wallet = new Option(
    '--keystore <file>',
    'sign with this encrypted JSON keystore (SVC_KEYSTORE_PASSWORD, or a prompt)',
  );
  const chainOptions = (command: Command) =>
    command
      .addOption(wallet)
      .option('--registry <address>', 'JobRegistry (else SVC_JOB_REGISTRY, else .dev/stack.json)')
      .option('--delegate <address>', "the service's signer (else SVC_DELEGATE, else .dev/stack.json)");

  program
    .command('login')
    .description(
      'sign in with the wallet (SVC_PRIVATE_KEY, --keystore, or a prompt); the token is kept until it expires',
    )
    .addOption(wallet)
    .action(
      action(async (context, options: { keystore?: string }) =>
        (await loginCommands()).login(context, options),
      ),
    );
  program
    .command('logout')
    .description("forget this service's sign-in token and saved key")
    .action(action(async (context) => (await loginCommands()).logout(context)));

  const keys = program.command('keys').description("the signed-in wallet's API keys");
  keys
    .command('create')
    .description('mint a key; it is shown once')
    .option('--name <name>', 'a label, up to 64 characters')
    .option('--cap <amount>', 'lifetime spend cap: wei, or with a unit (0.01ether)')
    .option('--save', 'keep the key for svc chat and svc models')
    .action(
      action(async (context, options: { name?: string; cap?: string; save?: boolean }) =>
        (await keyCommands()).createKey(context, options),
      ),
    );
  keys
    .command('list')
    .description('every key, revoked ones included, newest first')
    .action(action(async (context) => (await keyCommands()).listKeys(context)));
  keys
    .command('cap')
    .description('set the spend cap of a key (wei, or with a unit), or remove it with "none"')
    .argument('<id>', 'the key id (svc keys list)')
    .argument('<amount>', 'the cap, or none')
    .action(
      action(async (context, id: string, amount: string) =>
        (await keyCommands()).capKey(context, id, amount),
      ),
    );
  keys
    .command('revoke')
    .description('stop a key at once; it stays listed')
    .argument('<id>')
    .action(action(async (context, id: string) => (await keyCommands()).revokeKey(context, id)));
  keys
    .command('delete')
    .description('remove a revoked key from the listing')
    .argument('<id>')
    .action(action(async (context, id: string) => (await keyCommands()).deleteKey(context, id)));

  program
    .command('usage')
    .description("the wallet's calls, newest first: key, model, outcome, fee, timings, job and transaction")
    .option('--key <id>', 'only the calls of this key (svc keys list)')
    .option(
      '--since <time>',
      'calls from this time: ISO 8601 with a zone, a date (midnight UTC), or back from now (24h, 7d)',
    )
    .option('--until <time>', 'calls before this time, the same forms')
    .option('--limit <n>', 'calls per page, 1 to 200 (default 50; 200 with --all)')
    .option('--all', 'every page, not only the newest')
    .action(action(async (context, options: UsageOptions) => (await usageCommand()).usage(context, options)));

  chainOptions(
    program
      .command('balance')
      .description(
        "the wallet's prepaid balance, its authorization of the service's signer, and the allowance left",
      )
      .option('--address <address>', 'another wallet than the signed-in one'),
  ).action(
    action(async (context, options: ChainOptions & { address?: string }) =>
      (await funds()).balance(context, options),
    ),
  );
  chainOptions(
    program
      .command('deposit')
      .description('deposit() into JobRegistry: the balance calls paid per call draw from')
      .argument('<amount>', 'wei, or with a unit (0.01ether)'),
  ).action(
    action(async (context, amount: string, options: ChainOptions) =>
      (await funds()).deposit(context, amount, options),
    ),
  );
  chainOptions(
    program
      .command('authorize')
      .description(
        "depositAndAuthorize(<service signer>): the 402's accepts transaction; adds balance and allowance",
      )
      .argument('<amount>', 'wei, or with a unit (0.01ether)'),
  ).action(
    action(async (context, amount: string, options: ChainOptions) =>
      (await funds()).authorize(context, amount, options),
    ),
  );

  program
    .command('models')
    .description('the models served now')
    .option('--api-key <key>', 'else SVC_API_KEY, else the saved key')
    .action(
      action(async (context, options: { apiKey?: string }) =>
        (await chatCommands()).models(context, options),
      ),
    );
  program
    .command('chat')
    .description('a streamed completion with an API key (--api-key, SVC_API_KEY, or the saved key)')
    .argument('[message...]', 'the message; else standard input')
    .option('--model <id>', 'a model id (default: the first served)')
    .option('--system <text>', 'a system message')
    .option('--conversation <id>', 'conversation_id: keep a conversation on one session')
    .option('--api-key <key>', 'else SVC_API_KEY, else the saved key')
    .option('--verbose', 'print the service object (job, session, transaction, worker)')
    .action(
      action(async (context, words: string[], options: ChatOptions) =>
        (await chatCommands()).chat(context, words, options),
      ),
    );
  program
    .command('pay')
    .description('a call with no API key, paid per call (x402) from the prepaid balance')
    .argument('[message...]', 'the message; else standard input')
    .option('--model <id>', "a model id (default: the local stack's first)")
    .option('--system <text>', 'a system message')
    .option('--conversation <id>', 'conversation_id')
    .option('--verbose', 'print the service object')
    .option('--yes', 'pay without asking')
    .option('--max <amount>', 'decline a price above this (wei, or with a unit)')
    .addOption(wallet)
    .action(
      action(async (context, words: string[], options: PayOptions) =>
        (await payCommand()).pay(context, words, options),
      ),
    );

  return { program, exitCode: () => exitCode };
}

/** Parses `argv` (without node and the script) and runs the command; resolves with the exit code. */
export async function runCli(
  argv: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<ExitCode> {
  const { program, exitCode } = buildProgram(env, argv.includes('--json'));
  try {
    await program.parseAsync([...argv], { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.exitCode === 0) return EXIT.ok; // --help, --version
      return EXIT.usage; // commander has said what is wrong, on stderr
    }
    throw error;
  }
  return exitCode();
}
