import { JsonRpcProvider, Network, type TransactionRequest, type Wallet } from 'ethers';
import { connectJobRegistry, type JobRegistry } from '@svc/contracts';
import type { CommandContext } from './context.js';
import { EXIT, CliError, usageError } from './errors.js';
import type { Output } from './output.js';

/** The chain a service runs on, as much as a wallet needs: the RPC, JobRegistry and the delegate to authorize. */
export interface ChainTarget {
  readonly provider: JsonRpcProvider;
  readonly chainId: bigint;
  readonly registry: JobRegistry;
  /** The service's signer, which wallets authorize (`depositAndAuthorize`) so keyed calls are paid. */
  readonly delegate: string;
}

/**
 * JobRegistry and the delegate: --registry / SVC_JOB_REGISTRY and --delegate / SVC_DELEGATE, else the
 * local stack's (`.dev/stack.json`). The chain id is the RPC's own, checked against the stack's.
 */
export async function connectChainTarget(
  context: CommandContext,
  options: { registry?: string; delegate?: string },
): Promise<ChainTarget> {
  const stack = context.stack;
  const registryAddress = options.registry ?? context.env.SVC_JOB_REGISTRY ?? stack?.contracts.jobRegistry;
  const delegate = options.delegate ?? context.env.SVC_DELEGATE ?? stack?.delegate ?? undefined;
  if (!registryAddress) throw usageError('JobRegistry unknown: pass --registry or set SVC_JOB_REGISTRY');
  if (!delegate) throw usageError("the service's signer is unknown: pass --delegate or set SVC_DELEGATE");
  const rpcUrl = context.rpcUrl();
  const probe = new JsonRpcProvider(rpcUrl);
  let chainId: bigint;
  try {
    chainId = (await probe.getNetwork()).chainId;
  } catch (error) {
    throw new CliError(`cannot reach the chain at ${rpcUrl}: ${(error as Error).message}`, EXIT.failed, {
      remedy: 'Check --rpc-url or SVC_RPC_URL',
    });
  } finally {
    probe.destroy();
  }
  if (stack && BigInt(stack.chainId) !== chainId)
    throw usageError(`the chain at ${rpcUrl} is ${chainId}, the service's is ${stack.chainId}`);
  const network = Network.from(chainId);
  const provider = new JsonRpcProvider(rpcUrl, network, { staticNetwork: network, pollingInterval: 250 });
  return { provider, chainId, registry: connectJobRegistry(registryAddress, provider), delegate };
}

/** Where a wallet stands with the service on chain. */
export interface WalletPosition {
  readonly address: string;
  readonly ethBalanceWei: bigint;
  readonly prepaidBalanceWei: bigint;
  readonly delegate: string;
  readonly delegateAuthorized: boolean;
  readonly allowanceWei: bigint;
}

export async function walletPosition(chain: ChainTarget, address: string): Promise<WalletPosition> {
  const [ethBalanceWei, prepaidBalanceWei, delegateAuthorized, allowanceWei] = await Promise.all([
    chain.provider.getBalance(address),
    chain.registry.prepaidBalanceOf(address),
    chain.registry.isDelegateAuthorized(address, chain.delegate),
    chain.registry.delegateAllowance(address, chain.delegate),
  ]);
  return {
    address,
    ethBalanceWei,
    prepaidBalanceWei,
    delegate: chain.delegate,
    delegateAuthorized,
    allowanceWei,
  };
}

/**
 * Sends a transaction from `wallet` and waits until it is mined, with a spinner meanwhile; a revert or
 * a refusal by the node is a one-line error naming the transaction.
 */
export async function sendAndWait(
  output: Output,
  wallet: Wallet,
  what: string,
  request: TransactionRequest,
): Promise<{ hash: string; blockNumber: number }> {
  const spinner = (await output.progress(`Sending ${what}`)).start();
  try {
    const sent = await wallet.sendTransaction(request);
    spinner.text = `Waiting for ${what} to be mined (${sent.hash})`;
    const receipt = await sent.wait();
    if (!receipt || receipt.status !== 1) throw new Error(`reverted (${sent.hash})`);
    spinner.succeed(`${what}: mined in block ${receipt.blockNumber} (${sent.hash})`);
    return { hash: sent.hash, blockNumber: receipt.blockNumber };
  } catch (error) {
    spinner.fail(`${what} failed`);
    const reason = (error as { shortMessage?: string }).shortMessage ?? (error as Error).message;
    throw new CliError(`${what} failed: ${reason}`, EXIT.failed, {
      remedy: 'Check the wallet has ETH for value and gas',
    });
  }
}
