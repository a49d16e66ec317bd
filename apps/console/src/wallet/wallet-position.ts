import { jobRegistryAbi } from '@svc/contracts/abi';
import { BrowserProvider, Contract, getAddress, Interface, isError, type TransactionReceipt } from 'ethers';
import type { ChainJson } from '@svc/api';
import type { Eip1193Provider } from './wallet-discovery.js';
import { ensureChain } from './wallet-sign-in.js';

const registryInterface = new Interface(jobRegistryAbi);

/** Where a wallet stands towards the service, read from JobRegistry (the same reads `svc balance` makes). */
export interface WalletPosition {
  readonly ethWei: bigint;
  readonly prepaidWei: bigint;
  readonly delegateAuthorized: boolean;
  readonly allowanceWei: bigint;
}

/** The transaction that pays for completions: `depositAndAuthorize(delegate)` with a value. */
export interface FundingTransaction {
  readonly to: string;
  readonly data: string;
  readonly value: bigint;
}

/**
 * Reads through the wallet's own provider, so the console needs no RPC endpoint of its own and the
 * numbers are the chain the wallet signs for.
 */
function browserProvider(provider: Eip1193Provider, chainId: number): BrowserProvider {
  const browser = new BrowserProvider(provider, chainId);
  // A devnet mines at once; a second between receipt polls is enough for any chain's blocks.
  browser.pollingInterval = 1_000;
  return browser;
}

/** The wallet is on another chain than the service's: its reads would describe another chain. */
export class WrongChainError extends Error {
  constructor(
    readonly walletChainId: number,
    readonly serviceChainId: number,
  ) {
    super(`Your wallet is on chain ${walletChainId}; the service runs on chain ${serviceChainId}.`);
    this.name = 'WrongChainError';
  }
}

export async function readPosition(
  provider: Eip1193Provider,
  chain: ChainJson & { delegate: string },
  address: string,
): Promise<WalletPosition> {
  const walletChainId = Number(await provider.request({ method: 'eth_chainId' }));
  if (walletChainId !== chain.chainId) throw new WrongChainError(walletChainId, chain.chainId);
  const browser = browserProvider(provider, chain.chainId);
  const registry = new Contract(chain.jobRegistry, registryInterface, browser);
  const [ethWei, prepaidWei, delegateAuthorized, allowanceWei] = (await Promise.all([
    browser.getBalance(address),
    registry.getFunction('prepaidBalanceOf')(address),
    registry.getFunction('isDelegateAuthorized')(address, chain.delegate),
    registry.getFunction('delegateAllowance')(address, chain.delegate),
  ])) as [bigint, bigint, boolean, bigint];
  return { ethWei, prepaidWei, delegateAuthorized, allowanceWei };
}

/** `depositAndAuthorize(delegate)` as the delegate-path 402's `accepts` entry spells it, for a given value. */
export function depositAndAuthorize(
  chain: ChainJson & { delegate: string },
  value: bigint,
): FundingTransaction {
  return {
    to: getAddress(chain.jobRegistry),
    data: registryInterface.encodeFunctionData('depositAndAuthorize', [chain.delegate]),
    value,
  };
}

/**
 * Sends a funding transaction from the wallet and reports its hash as soon as the wallet returns it, then
 * resolves with the receipt once mined. The wallet is moved back to the service's chain first if it left
 * it since sign-in. A reverted transaction rejects.
 */
export async function sendFunding(
  provider: Eip1193Provider,
  chainId: number,
  from: string,
  transaction: FundingTransaction,
  onSent: (hash: string) => void,
): Promise<TransactionReceipt> {
  await ensureChain(provider, chainId);
  const browser = browserProvider(provider, chainId);
  const signer = await browser.getSigner(from);
  const sent = await signer.sendTransaction({ ...transaction, chainId });
  onSent(sent.hash);
  try {
    const receipt = await sent.wait();
    if (!receipt) throw new Error(`Transaction ${sent.hash} was dropped.`);
    return receipt;
  } catch (error) {
    // The wallet's "speed up" sends the same call at a higher fee: its receipt is this deposit's.
    if (isError(error, 'TRANSACTION_REPLACED') && !error.cancelled && error.reason === 'repriced')
      return error.receipt;
    throw error;
  }
}
