import { useCallback, useEffect, useState } from 'preact/hooks';
import { parseEther } from 'ethers';
import type { ChainJson } from '@svc/api';
import { formatEth } from '../amounts.js';
import type { DelegateAccepts } from '../api/delegate-accepts.js';
import type { Eip1193Provider } from '../wallet/wallet-discovery.js';
import { ensureChain } from '../wallet/wallet-sign-in.js';
import {
  depositAndAuthorize,
  readPosition,
  WrongChainError,
  type WalletPosition,
} from '../wallet/wallet-position.js';
import { ErrorNotice } from './error-notice.js';
import { FundingPanel } from './funding-panel.js';

/** What a fresh deposit suggests when no refused call named a minimum. */
const SUGGESTED_DEPOSIT_WEI = parseEther('0.01');

/** The wallet's standing on JobRegistry, read through its provider, and the step that funds it. */
export function BalanceView(props: {
  provider: Eip1193Provider;
  chain: ChainJson;
  address: string;
  /** The delegate entry of the last call refused 402, if one was: its transaction and least value. */
  refusal: DelegateAccepts | undefined;
  onFunded: () => void;
}) {
  const { chain, provider, address } = props;
  const [position, setPosition] = useState<WalletPosition>();
  const [error, setError] = useState<unknown>();
  const delegate = chain.delegate;

  const refresh = useCallback(async () => {
    if (!delegate) return;
    setError(undefined);
    try {
      setPosition(await readPosition(provider, { ...chain, delegate }, address));
    } catch (failure) {
      setError(failure);
    }
  }, [provider, chain, delegate, address]);
  useEffect(() => void refresh(), [refresh]);
  // The wallet's numbers are its chain's: read again when the user moves it.
  useEffect(() => {
    const onChain = () => void refresh();
    provider.on?.('chainChanged', onChain);
    return () => provider.removeListener?.('chainChanged', onChain);
  }, [provider, refresh]);

  if (!delegate)
    return (
      <section aria-labelledby="balance-title">
        <h1 id="balance-title">Balance</h1>
        <p class="notice">This server runs no completions, so there is no signer to authorize.</p>
      </section>
    );
  const minimum = props.refusal?.minimumWei ?? 1n;
  return (
    <section aria-labelledby="balance-title">
      <div class="heading-row">
        <h1 id="balance-title">Balance</h1>
        <button type="button" onClick={() => void refresh()}>
          Refresh
        </button>
      </div>
      {error instanceof WrongChainError ? (
        <div class="notice notice-error" role="alert">
          <p>{error.message}</p>
          <button type="button" onClick={() => ensureChain(provider, chain.chainId).then(refresh, setError)}>
            Switch to chain {chain.chainId}
          </button>
        </div>
      ) : (
        <ErrorNotice error={error} title="Could not read the chain" />
      )}
      <dl class="facts" aria-busy={position === undefined && error === undefined}>
        <dt>Wallet</dt>
        <dd>
          <code>{address}</code>
        </dd>
        <dt>Chain</dt>
        <dd>
          {chain.chainId} · JobRegistry <code>{chain.jobRegistry}</code>
        </dd>
        <dt>Prepaid balance</dt>
        <dd data-testid="prepaid-balance">{position ? formatEth(position.prepaidWei) : '…'}</dd>
        <dt>Service signer</dt>
        <dd>
          <code>{delegate}</code>{' '}
          {position ? (
            <span
              class={position.delegateAuthorized ? 'badge ok' : 'badge warn'}
              data-testid="delegate-status"
            >
              {position.delegateAuthorized ? 'Authorized' : 'Not authorized'}
            </span>
          ) : null}
        </dd>
        <dt>Allowance</dt>
        <dd data-testid="allowance">{position ? formatEth(position.allowanceWei) : '…'}</dd>
        <dt>Wallet ETH</dt>
        <dd>{position ? formatEth(position.ethWei) : '…'}</dd>
      </dl>
      <h2>Deposit and authorize</h2>
      <FundingPanel
        provider={provider}
        chainId={chain.chainId}
        from={address}
        transaction={props.refusal?.transaction ?? depositAndAuthorize({ ...chain, delegate }, 0n)}
        minimumWei={minimum}
        suggestedWei={minimum > SUGGESTED_DEPOSIT_WEI ? minimum : SUGGESTED_DEPOSIT_WEI}
        onMined={() => {
          void refresh();
          props.onFunded();
        }}
      />
    </section>
  );
}
