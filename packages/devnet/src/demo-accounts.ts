import type { AnvilAccount } from '@svc/anvil';

/** What a demo account is for; every local run uses the same accounts for the same roles. */
export type DemoAccountRole =
  'owner' | 'service-signer' | 'worker' | 'wallet' | 'operator' | 'facilitator' | 'facilitator-operator';

/** Every role, in the order the description schema lists them. */
export const DEMO_ACCOUNT_ROLES = [
  'owner',
  'service-signer',
  'worker',
  'wallet',
  'operator',
  'facilitator',
  'facilitator-operator',
] as const satisfies readonly DemoAccountRole[];

export interface DemoAccount extends AnvilAccount {
  role: DemoAccountRole;
  /** One line for people reading the description or the summary. */
  purpose: string;
}

/** What user wallet 1 deposits on a fresh devnet, all of it as the service signer's allowance. */
export const DEMO_WALLET_DEPOSIT_WEI = 10n ** 18n;

const FIXED_ROLES: ReadonlyArray<{ role: DemoAccountRole; purpose: string }> = [
  { role: 'owner', purpose: 'deployed and owns both contracts; sets models, fees and parameters' },
  {
    role: 'service-signer',
    purpose: "the service's signer: opens sessions and submits jobs as the wallets' delegate",
  },
  { role: 'worker', purpose: 'reference worker 1: registers, claims sessions, answers jobs' },
  { role: 'worker', purpose: 'reference worker 2: registers, claims sessions, answers jobs' },
];

/**
 * The service signer's operators (docs/protocol.md, "Principals and operators"): a node takes at most
 * 16 pending blob transactions per account and no account with blob and plain ones pending together,
 * so the service sends from several accounts that all act for its signer.
 */
const OPERATOR_PURPOSES: readonly string[] = [
  "service operator 1: sends the service's blob transactions (job submissions)",
  "service operator 2: sends the service's blob transactions (job submissions)",
  "service operator 3: sends the service's plain transactions (sessions, refunds, releases)",
];

/**
 * The per-call payment side (docs/protocol.md, Per-call payment): the facilitator the payment-settler
 * settles as, authorized by the service signer as its delegate, and its operator that sends the
 * settlements.
 */
const PER_CALL_ROLES: ReadonlyArray<{ role: DemoAccountRole; purpose: string }> = [
  {
    role: 'facilitator',
    purpose:
      'the facilitator: settles per-call (x402) payments; the service signer authorized it as its delegate',
  },
  {
    role: 'facilitator-operator',
    purpose: "facilitator operator 1: sends the facilitator's settlements (blob transactions)",
  },
];

function walletPurpose(number: number): string {
  return number === 1
    ? 'user wallet 1: signs in, mints API keys; deposited 1 ETH and authorized the service signer, so its API-key calls are paid at once'
    : `user wallet ${number}: signs in, mints API keys; funded with ETH, no deposit and no delegate: its API-key calls get 402 until it sends the \`accepts\` transaction`;
}

/** Accounts the devnet hands out by role, plus one it keeps to itself for the KZG warm-up. */
export function demoAccountCount(walletCount: number): number {
  return FIXED_ROLES.length + walletCount + OPERATOR_PURPOSES.length + PER_CALL_ROLES.length + 1;
}

/**
 * Gives anvil's dev accounts (derived from its well-known mnemonic, so the same on every run) their
 * roles in index order: owner, service signer, two workers, the user wallets, the service signer's
 * operators, then the facilitator and its operator (each group after the ones that came before it
 * existed, so those kept their index).
 */
export function assignDemoAccounts(accounts: readonly AnvilAccount[], walletCount: number): DemoAccount[] {
  const needed = demoAccountCount(walletCount) - 1;
  if (accounts.length < needed) {
    throw new Error(`the devnet needs ${needed} dev accounts, anvil has ${accounts.length}`);
  }
  const fixed = FIXED_ROLES.map((role, index) => ({ ...(accounts[index] as AnvilAccount), ...role }));
  const walletsEnd = FIXED_ROLES.length + walletCount;
  const wallets = accounts.slice(FIXED_ROLES.length, walletsEnd).map((account, index) => ({
    ...account,
    role: 'wallet' as const,
    purpose: walletPurpose(index + 1),
  }));
  const operatorsEnd = walletsEnd + OPERATOR_PURPOSES.length;
  const operators = accounts.slice(walletsEnd, operatorsEnd).map((account, index) => ({
    ...account,
    role: 'operator' as const,
    purpose: OPERATOR_PURPOSES[index] as string,
  }));
  const perCall = PER_CALL_ROLES.map((role, index) => ({
    ...(accounts[operatorsEnd + index] as AnvilAccount),
    ...role,
  }));
  return [...fixed, ...wallets, ...operators, ...perCall];
}

/** The first account with `role`; the devnet always has one owner, service signer and worker. */
export function accountWithRole<A extends { role: DemoAccountRole }>(
  accounts: readonly A[],
  role: DemoAccountRole,
): A {
  const account = accounts.find((candidate) => candidate.role === role);
  if (!account) throw new Error(`the devnet has no ${role} account`);
  return account;
}

/** The service signer's operator accounts, in order: the two blob senders, then the plain sender. */
export function operatorAccounts<A extends { role: DemoAccountRole }>(accounts: readonly A[]): A[] {
  return accounts.filter((account) => account.role === 'operator');
}
