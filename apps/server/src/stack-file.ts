import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { JsonRpcProvider, Network } from 'ethers';
import { connectJobRegistry } from '@svc/contracts';
import type { GatewayInstance } from '@svc/gateway';
import type { PaymentSettlerInstance } from '@svc/payment-settler';
import type { RunningTarget } from '@svc/runtime';
import { STACK_FILE_NAME, type DevWallet, type StackFile } from './stack-file-format.js';

/** Writes `<stateDir>/stack.json` (owner-only: it holds dev keys); the returned cleanup removes it if still ours. */
export async function writeStackFile(running: RunningTarget): Promise<() => Promise<void>> {
  const chain = running.dependencies.chain;
  const gateway = running.instances.get('gateway') as GatewayInstance | undefined;
  const settler = running.instances.get('payment-settler') as PaymentSettlerInstance | undefined;
  const path = join(running.stateDir, STACK_FILE_NAME);
  if (!chain || !gateway) return async () => {};
  const devnet = chain.devnet;
  const delegate = devnet?.accounts.find((account) => account.role === 'service-signer')?.address ?? null;
  const wallets = devnet?.accounts.filter((account) => account.role === 'wallet') ?? [];
  const authorized = await delegateAuthorizations(
    chain.rpcUrl,
    chain.chainId,
    chain.contracts.jobRegistry,
    delegate,
    wallets,
  );
  const devWallet = ({ address, privateKey }: DevWallet): DevWallet => ({ address, privateKey });
  const demoWallet = wallets.find((_, index) => authorized[index]);
  const stack: StackFile = {
    gatewayUrl: gateway.publicUrl,
    rpcUrl: chain.rpcUrl,
    chainId: chain.chainId,
    contracts: { jobRegistry: chain.contracts.jobRegistry, workerRegistry: chain.contracts.workerRegistry },
    delegate,
    facilitator: settler?.parts?.terms.parties.facilitator ?? null,
    models: devnet?.models.map((model) => model.name) ?? [],
    accounts: wallets.filter((_, index) => !authorized[index]).map(devWallet),
    demoWallet: demoWallet ? devWallet(demoWallet) : null,
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

/** Whether each wallet has authorized `delegate` (JobRegistry `isDelegateAuthorized`), read now. */
async function delegateAuthorizations(
  rpcUrl: string,
  chainId: number,
  jobRegistryAddress: string,
  delegate: string | null,
  wallets: readonly { address: string }[],
): Promise<boolean[]> {
  if (!delegate) return wallets.map(() => false);
  const network = Network.from(chainId);
  const provider = new JsonRpcProvider(rpcUrl, network, { staticNetwork: network });
  try {
    const registry = connectJobRegistry(jobRegistryAddress, provider);
    return await Promise.all(
      wallets.map((wallet) => registry.isDelegateAuthorized(wallet.address, delegate)),
    );
  } finally {
    provider.destroy();
  }
}
