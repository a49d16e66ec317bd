import { getAddress } from 'ethers';
import { formatAmount, parseAmount } from '../amounts.js';
import { connectChainTarget, sendAndWait, walletPosition } from '../chain.js';
import type { CommandContext } from '../context.js';
import { usageError } from '../errors.js';
import { loadWallet, type WalletOptions } from '../wallet.js';

export interface ChainOptions extends WalletOptions {
  readonly registry?: string;
  readonly delegate?: string;
}

/**
 * `svc balance`: the wallet's prepaid balance on JobRegistry, whether it authorized the service's signer,
 * and the allowance left. The wallet is --address, else the wallet given (SVC_PRIVATE_KEY, --keystore), else
 * the one signed in last, else one asked for.
 */
export async function balance(
  context: CommandContext,
  options: ChainOptions & { address?: string },
): Promise<void> {
  const address = await addressOf(context, options);
  const chain = await connectChainTarget(context, options);
  try {
    const position = await walletPosition(chain, address);
    context.output.result(position, () =>
      [
        `Wallet             ${position.address}`,
        `ETH                ${formatAmount(position.ethBalanceWei)}`,
        `Prepaid balance    ${formatAmount(position.prepaidBalanceWei)}`,
        `Delegate           ${position.delegate} (${position.delegateAuthorized ? 'authorized' : 'not authorized: svc authorize <amount>'})`,
        `Allowance          ${formatAmount(position.allowanceWei)}`,
      ].join('\n'),
    );
  } finally {
    chain.provider.destroy();
  }
}

/** `svc deposit <amount>`: `deposit()` on JobRegistry, what a call paid per call draws from. */
export async function deposit(context: CommandContext, amount: string, options: ChainOptions): Promise<void> {
  await fund(context, amount, options, 'deposit');
}

/**
 * `svc authorize <amount>`: `depositAndAuthorize(<service signer>)`, the transaction a delegate-path 402
 * lists in `error.accepts`: it adds the value to the balance and raises the signer's allowance by as much.
 */
export async function authorize(
  context: CommandContext,
  amount: string,
  options: ChainOptions,
): Promise<void> {
  await fund(context, amount, options, 'depositAndAuthorize');
}

async function fund(
  context: CommandContext,
  amountText: string,
  options: ChainOptions,
  method: 'deposit' | 'depositAndAuthorize',
): Promise<void> {
  const value = parseAmount(amountText);
  if (value === 0n) throw usageError('the amount must be above zero (JobRegistry refuses an empty deposit)');
  const chain = await connectChainTarget(context, options);
  try {
    const wallet = await loadWallet(options, { ...context.walletSource, provider: chain.provider });
    const data =
      method === 'deposit'
        ? chain.registry.interface.encodeFunctionData('deposit')
        : chain.registry.interface.encodeFunctionData('depositAndAuthorize', [chain.delegate]);
    const what =
      method === 'deposit'
        ? `deposit of ${formatAmount(value)}`
        : `depositAndAuthorize(${chain.delegate}) with ${formatAmount(value)}`;
    const to = await chain.registry.getAddress();
    const mined = await sendAndWait(context.output, wallet, what, {
      to,
      data,
      value,
      chainId: chain.chainId,
    });
    const position = await walletPosition(chain, wallet.address);
    context.output.result({ transaction: mined.hash, blockNumber: mined.blockNumber, ...position }, () =>
      [
        `Mined in block ${mined.blockNumber}: ${mined.hash}`,
        `Prepaid balance    ${formatAmount(position.prepaidBalanceWei)}`,
        ...(method === 'depositAndAuthorize'
          ? [`Allowance          ${formatAmount(position.allowanceWei)}`]
          : []),
      ].join('\n'),
    );
  } finally {
    chain.provider.destroy();
  }
}

async function addressOf(
  context: CommandContext,
  options: WalletOptions & { address?: string },
): Promise<string> {
  if (options.address) {
    try {
      return getAddress(options.address);
    } catch {
      throw usageError(`"${options.address}" is not an address`);
    }
  }
  if (options.keystore) return (await loadWallet(options, context.walletSource)).address;
  const wallet = context.namedWallet ?? context.credentials.lastSignIn(context.baseUrl)?.address;
  if (wallet) return wallet;
  return (await loadWallet(options, context.walletSource)).address;
}
