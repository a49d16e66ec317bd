import type { StackFile } from '../stack-file-format.js';

/**
 * The summary `npm start` prints once everything is up: where the API and the console are, the models,
 * the demo wallet with its dev key, and the next three commands.
 */
export function startUpSummary(
  stack: StackFile,
  details: {
    seconds: number;
    logFile: string | null;
    /** The `svc` command of this checkout (`node_modules/.bin/svc`): named by path, it runs from any directory. */
    cli: string;
  },
): string {
  const demo = stack.demoWallet;
  const lines = [
    '',
    `svc is up (started in ${details.seconds.toFixed(1)} s)`,
    '',
    `  API          ${stack.gatewayUrl}/v1  (OpenAI-compatible; sign-in and keys under ${stack.gatewayUrl}/api)`,
    `  Console      ${stack.gatewayUrl}/  (in a browser with a wallet: keys, balance, a playground)`,
    `  Models       ${stack.models.join(', ') || '(none yet)'}`,
    `  Chain        ${stack.rpcUrl}  (chain id ${stack.chainId}, JobRegistry ${stack.contracts.jobRegistry})`,
  ];
  if (demo)
    lines.push(
      `  Demo wallet  ${demo.address}  (has deposited and authorized the service's signer)`,
      `  Its dev key  ${demo.privateKey}  (a public devnet key: never use it on a real chain)`,
    );
  if (details.logFile) lines.push(`  Logs         ${details.logFile}`);
  if (demo)
    lines.push(
      '',
      'Next, in another terminal:',
      '',
      `  alias svc=${details.cli}`,
      `  export SVC_PRIVATE_KEY=${demo.privateKey}`,
      '  svc login && svc keys create --name demo --save   # sign in with the wallet, mint a key',
      '  svc chat "Hello"                                  # a streamed answer, paid with the key',
      '  svc pay "Hello"                                   # no key: paid per call (x402)',
    );
  lines.push('', 'Ctrl-C stops everything.', '');
  return lines.join('\n');
}
