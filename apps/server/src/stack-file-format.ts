// The format of `<STATE_DIR>/stack.json`, apart from its writer (stack-file.ts) so that readers such as
// the launcher load nothing else.

/**
 * What `npm start` runs, for tools and people (the `svc` command, tests, a curl by hand): where the
 * gateway and the chain are, the contracts, the service's delegate, the models and devnet user wallets
 * that are funded with ETH and have no delegate yet (their first API-key call shows the 402 flow), and a
 * demo wallet that has deposited and authorized the delegate already (`npm start`'s summary shows it).
 */
export interface StackFile {
  readonly gatewayUrl: string;
  readonly rpcUrl: string;
  readonly chainId: number;
  readonly contracts: { readonly jobRegistry: string; readonly workerRegistry: string };
  /** The address wallets authorize (`depositAndAuthorize`) so API-key calls are paid. */
  readonly delegate: string | null;
  /** The x402 facilitator; null while this server takes no per-call payments. */
  readonly facilitator: string | null;
  readonly models: readonly string[];
  readonly accounts: readonly DevWallet[];
  /** A devnet wallet with a prepaid balance that has authorized `delegate`: calls work at once. */
  readonly demoWallet: DevWallet | null;
}

export interface DevWallet {
  readonly address: string;
  readonly privateKey: string;
}

export const STACK_FILE_NAME = 'stack.json';
