import { getBytes, type JsonRpcProvider, type Wallet, type HDNodeWallet } from 'ethers';
import type { BrowserContext, Page } from 'playwright-core';

/**
 * A browser wallet extension, stood in for by a real ethers wallet on the devnet: the page sees an EIP-1193
 * provider, announced per EIP-6963 (and as `window.ethereum`), whose requests are answered in the test
 * process. Signing and sending use the wallet's key; reads go to the devnet's RPC. Like a real wallet it
 * starts on a chain of its own choosing and switches only when asked (EIP-3326).
 */
export interface InjectedWalletOptions {
  /** The name the wallet announces (EIP-6963 `info.name`). */
  readonly name: string;
  wallet: Wallet | HDNodeWallet;
  readonly provider: JsonRpcProvider;
  /** The chain the wallet is on when the page opens. */
  readonly startChainId: number;
  /** Chains the wallet knows and can switch to; others are refused with EIP-3326's 4902. */
  readonly knownChainIds: readonly number[];
}

/** Every request the page made of an injected wallet, in order (methods only). */
export type WalletRequestLog = { wallet: string; method: string }[];

export interface InjectedWallets {
  readonly log: WalletRequestLog;
  /** Moves a wallet to another account, as the user would in the extension: `accountsChanged` fires. */
  switchAccount(page: Page, name: string, account: Wallet | HDNodeWallet): Promise<void>;
}

interface WalletAnswer {
  readonly result?: unknown;
  readonly error?: { code: number; message: string };
}

/**
 * Installs the wallets into every page of `context` (before any page script runs) and answers their
 * requests.
 */
export async function injectWallets(
  context: BrowserContext,
  installed: readonly InjectedWalletOptions[],
): Promise<InjectedWallets> {
  const log: WalletRequestLog = [];
  const wallets = installed.map((options) => ({ ...options }));
  const chainIds = new Map(wallets.map((options) => [options.name, options.startChainId]));
  await context.exposeFunction(
    '__injectedWalletRequest',
    async (name: string, method: string, params: unknown[] | undefined): Promise<WalletAnswer> => {
      const options = wallets.find((candidate) => candidate.name === name);
      if (!options) return { error: { code: 4100, message: `no wallet ${name}` } };
      log.push({ wallet: name, method });
      try {
        return { result: await answer(options, chainIds, method, params ?? []) };
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        return {
          error: {
            code: typeof code === 'number' ? code : -32603,
            message: error instanceof Error ? error.message : String(error),
          },
        };
      }
    },
  );
  await context.addInitScript(
    (names: string[]) => {
      type Listener = (...args: unknown[]) => void;
      const call = (window as unknown as Record<string, unknown>)['__injectedWalletRequest'] as (
        name: string,
        method: string,
        params: unknown,
      ) => Promise<WalletAnswer>;
      const emitters: Record<string, (event: string, ...args: unknown[]) => void> = {};
      (window as unknown as { __injectedWallets: typeof emitters }).__injectedWallets = emitters;
      const providers = names.map((name) => {
        const listeners = new Map<string, Set<Listener>>();
        const emit = (event: string, ...args: unknown[]) =>
          listeners.get(event)?.forEach((listener) => listener(...args));
        const provider = {
          async request({ method, params }: { method: string; params?: unknown }) {
            const answer = await call(name, method, params ?? []);
            if (answer.error)
              throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
            if (method === 'wallet_switchEthereumChain') {
              emit('chainChanged', (params as { chainId: string }[])[0]!.chainId);
            }
            return answer.result;
          },
          on(event: string, listener: Listener) {
            if (!listeners.has(event)) listeners.set(event, new Set());
            listeners.get(event)!.add(listener);
          },
          removeListener(event: string, listener: Listener) {
            listeners.get(event)?.delete(listener);
          },
        };
        emitters[name] = emit;
        // A new uuid on every page load, as EIP-6963 wallets do; rdns is what stays.
        const info = {
          uuid: crypto.randomUUID(),
          name,
          rdns: `test.${name.toLowerCase().replace(/[^a-z0-9]+/g, '-')}`,
          icon: 'data:image/svg+xml;base64,PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHZpZXdCb3g9IjAgMCAxIDEiPjxyZWN0IHdpZHRoPSIxIiBoZWlnaHQ9IjEiIGZpbGw9IiMzYjRmZDgiLz48L3N2Zz4=',
        };
        return { info, provider };
      });
      const announce = () =>
        providers.forEach((detail) =>
          window.dispatchEvent(
            new CustomEvent('eip6963:announceProvider', { detail: Object.freeze(detail) }),
          ),
        );
      window.addEventListener('eip6963:requestProvider', announce);
      announce();
      (window as unknown as { ethereum?: unknown }).ethereum = providers[0]?.provider;
    },
    wallets.map((options) => options.name),
  );
  return {
    log,
    async switchAccount(page, name, account) {
      wallets.find((options) => options.name === name)!.wallet = account;
      await page.evaluate(
        ([wallet, address]) =>
          (
            window as unknown as {
              __injectedWallets: Record<string, (event: string, ...args: unknown[]) => void>;
            }
          ).__injectedWallets[wallet]!('accountsChanged', [address]),
        [name, account.address] as const,
      );
    },
  };
}

async function answer(
  options: InjectedWalletOptions,
  chainIds: Map<string, number>,
  method: string,
  params: unknown[],
): Promise<unknown> {
  const { wallet, provider } = options;
  switch (method) {
    case 'eth_requestAccounts':
    case 'eth_accounts':
      return [wallet.address];
    case 'eth_chainId':
      return `0x${chainIds.get(options.name)!.toString(16)}`;
    case 'wallet_switchEthereumChain': {
      const chainId = Number((params[0] as { chainId: string }).chainId);
      if (!options.knownChainIds.includes(chainId))
        throw Object.assign(new Error(`Unrecognized chain ID ${chainId}`), { code: 4902 });
      chainIds.set(options.name, chainId);
      return null;
    }
    case 'personal_sign': {
      const [message, address] = params as [string, string];
      if (address.toLowerCase() !== wallet.address.toLowerCase())
        throw Object.assign(new Error('personal_sign for another account'), { code: 4100 });
      return wallet.signMessage(getBytes(message));
    }
    case 'eth_sendTransaction': {
      const [request] = params as [{ from: string; to: string; data?: string; value?: string; gas?: string }];
      if (request.from.toLowerCase() !== wallet.address.toLowerCase())
        throw Object.assign(new Error('eth_sendTransaction from another account'), { code: 4100 });
      const chainId = chainIds.get(options.name)!;
      const sent = await wallet.connect(provider).sendTransaction({
        to: request.to,
        ...(request.data ? { data: request.data } : {}),
        ...(request.value ? { value: BigInt(request.value) } : {}),
        chainId,
      });
      return sent.hash;
    }
    default:
      // Reads (eth_call, balances, receipts, blocks, gas) go to the chain as a wallet's node would answer.
      return provider.send(method, params);
  }
}
