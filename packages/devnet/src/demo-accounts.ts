import type { AnvilAccount } from '@svc/anvil';

/** What a demo account is for; every local run uses the same accounts for the same roles. */
export type DemoAccountRole = 'owner' | 'service-signer' | 'worker' | 'wallet';

export interface DemoAccount extends AnvilAccount {
  role: DemoAccountRole;
  /** One line for people reading the description or the summary. */
  purpose: string;
}

const FIXED_ROLES: ReadonlyArray<{ role: DemoAccountRole; purpose: string }> = [
  { role: 'owner', purpose: 'deployed and owns both contracts; sets models, fees and parameters' },
  {
    role: 'service-signer',
    purpose: "the service's signer: opens sessions and submits jobs as the wallets' delegate",
  },
  { role: 'worker', purpose: 'reference worker 1: registers, claims sessions, answers jobs' },
  { role: 'worker', purpose: 'reference worker 2: registers, claims sessions, answers jobs' },
];

/** Accounts the devnet hands out by role, plus one it keeps to itself for the KZG warm-up. */
export function demoAccountCount(walletCount: number): number {
  return FIXED_ROLES.length + walletCount + 1;
}

/**
 * Gives anvil's dev accounts (derived from its well-known mnemonic, so the same on every run) their
 * roles in index order: owner, service signer, two workers, then the user wallets.
 */
export function assignDemoAccounts(accounts: readonly AnvilAccount[], walletCount: number): DemoAccount[] {
  const needed = FIXED_ROLES.length + walletCount;
  if (accounts.length < needed) {
    throw new Error(`the devnet needs ${needed} dev accounts, anvil has ${accounts.length}`);
  }
  const fixed = FIXED_ROLES.map((role, index) => ({ ...(accounts[index] as AnvilAccount), ...role }));
  const wallets = accounts.slice(FIXED_ROLES.length, needed).map((account, index) => ({
    ...account,
    role: 'wallet' as const,
    purpose: `user wallet ${index + 1}: signs in, mints API keys, deposits and authorizes the service signer`,
  }));
  return [...fixed, ...wallets];
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
