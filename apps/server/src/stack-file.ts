import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { JsonRpcProvider, Network } from 'ethers';
import { connectJobRegistry } from '@svc/contracts';
import type { GatewayInstance } from '@svc/gateway';
import type { PaymentSettlerInstance } from '@svc/payment-settler';
import type { RunningTarget } from '@svc/runtime';

/**
 * What `npm start` runs, for tools and people (the `svc` command, tests, a curl by hand): where the
 * gateway and the chain are, the contracts, the service's delegate, the models and devnet user wallets
 * that are funded with ETH and have no delegate yet (their first API-key call shows the 402 flow).
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
  readonly accounts: readonly { readonly address: string; readonly privateKey: string }[];
}

export const STACK_FILE_NAME = 'stack.json';

/** Writes `<stateDir>/stack.json` (owner-only: it holds dev keys); the returned cleanup removes it if still ours. */
export async function writeStackFile(running: RunningTarget): Promise<() => Promise<void>> {
  const chain = running.dependencies.chain;
  const gateway = running.instances.get('gateway') as GatewayInstance | undefined;
  const settler = running.instances.get('payment-settler') as PaymentSettlerInstance | undefined;
  const path = join(running.stateDir, STACK_FILE_NAME);
  if (!chain || !gateway) return async () => {};
  const devnet = chain.devnet;
  const delegate = devnet?.accounts.find((account) => account.role === 'service-signer')?.address ?? null;
  const withoutDelegate = await walletsWithoutDelegate(
    chain.rpcUrl,
    chain.chainId,
    chain.contracts.jobRegistry,
    delegate,
    devnet?.accounts.filter((account) => account.role === 'wallet') ?? [],
  );
  const stack: StackFile = {
    gatewayUrl: gateway.publicUrl,
    rpcUrl: chain.rpcUrl,
    chainId: chain.chainId,
    contracts: { jobRegistry: chain.contracts.jobRegistry, workerRegistry: chain.contracts.workerRegistry },
    delegate,
    facilitator: settler?.parts?.terms.parties.facilitator ?? null,
    models: devnet?.models.map((model) => model.name) ?? [],
    accounts: withoutDelegate.map(({ address, privateKey }) => ({ address, privateKey })),
  };
  const text = `${JSON.stringify(stack, null, 2)}\n`;
  mkdirSync(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.tmp`;
  writeFileSync(partial, text, { mode: 0o600 });
  renameSync(partial, path);
  return async () => {
    try {
      if (readFileSync(path, 'utf8') === text) rmSync(path, { force: true });
    } catch {
      // Already gone.
    }
  };
}

/** The wallets that have not authorized `delegate` (JobRegistry `isDelegateAuthorized`), read now. */
async function walletsWithoutDelegate<A extends { address: string }>(
  rpcUrl: string,
  chainId: number,
  jobRegistryAddress: string,
  delegate: string | null,
  wallets: readonly A[],
): Promise<A[]> {
  if (!delegate) return [...wallets];
  const network = Network.from(chainId);
  const provider = new JsonRpcProvider(rpcUrl, network, { staticNetwork: network });
  try {
    const registry = connectJobRegistry(jobRegistryAddress, provider);
    const authorized = await Promise.all(
      wallets.map((wallet) => registry.isDelegateAuthorized(wallet.address, delegate)),
    );
    return wallets.filter((_, index) => !authorized[index]);
  } finally {
    provider.destroy();
  }
}
