/** An injected wallet: the EIP-1193 provider and, when it announced itself per EIP-6963, who it is. */
export interface Eip1193Provider {
  request(args: { method: string; params?: unknown[] | object }): Promise<unknown>;
  on?(event: string, listener: (...args: unknown[]) => void): void;
  removeListener?(event: string, listener: (...args: unknown[]) => void): void;
}

export interface InjectedWallet {
  /**
   * EIP-6963's `rdns` (stable across page loads, unlike its per-load `uuid`), or `injected` for a bare
   * `window.ethereum`.
   */
  readonly id: string;
  readonly name: string;
  /** A data: URI the wallet announced (EIP-6963 requires one); shown as its icon. */
  readonly icon?: string;
  readonly provider: Eip1193Provider;
}

interface AnnounceProviderEvent extends Event {
  readonly detail: {
    readonly info: {
      readonly uuid: string;
      readonly name: string;
      readonly icon: string;
      readonly rdns: string;
    };
    readonly provider: Eip1193Provider;
  };
}

/**
 * Finds the injected wallets: every wallet that announces itself per EIP-6963 (several extensions can be
 * installed at once), and `window.ethereum` when none does (older wallets). `onChange` gets the whole list
 * each time a wallet announces itself, which may happen after the page loaded. Returns the unsubscribe.
 */
export function discoverWallets(onChange: (wallets: readonly InjectedWallet[]) => void): () => void {
  const announced = new Map<string, InjectedWallet>();
  const publish = () => {
    if (announced.size > 0) return onChange([...announced.values()]);
    const legacy = (window as { ethereum?: Eip1193Provider }).ethereum;
    onChange(legacy ? [{ id: 'injected', name: 'Browser wallet', provider: legacy }] : []);
  };
  const onAnnounce = (event: Event) => {
    const { info, provider } = (event as AnnounceProviderEvent).detail ?? {};
    const id = info?.rdns || info?.uuid;
    if (!id || typeof provider?.request !== 'function') return;
    // Only a data: image may be shown under the console's CSP (img-src 'self' data:), and it is inert there.
    const icon = typeof info.icon === 'string' && info.icon.startsWith('data:image/') ? info.icon : undefined;
    announced.set(id, {
      id,
      name: info.name || info.rdns || 'Wallet',
      provider,
      ...(icon ? { icon } : {}),
    });
    publish();
  };
  window.addEventListener('eip6963:announceProvider', onAnnounce);
  window.dispatchEvent(new Event('eip6963:requestProvider'));
  publish();
  return () => window.removeEventListener('eip6963:announceProvider', onAnnounce);
}
