import { useState } from 'preact/hooks';
import type { InjectedWallet } from '../wallet/wallet-discovery.js';
import { ErrorNotice } from './error-notice.js';

/**
 * Sign-In with Ethereum: pick a wallet when several announced themselves, then one button. Nothing is
 * sent on chain; the wallet only signs the server's challenge.
 */
export function SignInView(props: {
  wallets: readonly InjectedWallet[];
  /** Why the user is back here (a lapsed sign-in), if they are. */
  notice: string | undefined;
  onSignIn: (wallet: InjectedWallet) => Promise<void>;
}) {
  const { wallets } = props;
  const [chosen, setChosen] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>();
  const wallet = wallets.find((candidate) => candidate.id === chosen) ?? wallets[0];

  return (
    <section class="sign-in card" aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in with your wallet</h1>
      <p class="lead">
        Manage API keys for the OpenAI-compatible API, fund your calls, and try a model. Signing in costs no
        gas: your wallet signs a one-time message from this server.
      </p>
      {props.notice ? (
        <p class="notice" role="status">
          {props.notice}
        </p>
      ) : null}
      {wallets.length === 0 ? (
        <p class="notice notice-error" role="alert">
          No browser wallet was found. Install one (MetaMask, Rabby, Coinbase Wallet, …) or enable it for this
          site, then reload the page.
        </p>
      ) : null}
      {wallets.length > 1 ? (
        <fieldset class="wallet-choice">
          <legend>Wallet</legend>
          {wallets.map((candidate) => (
            <label key={candidate.id} class="wallet-option">
              <input
                type="radio"
                name="wallet"
                value={candidate.id}
                checked={candidate.id === wallet?.id}
                onChange={() => setChosen(candidate.id)}
              />
              {candidate.icon ? <img src={candidate.icon} alt="" width={20} height={20} /> : null}
              {candidate.name}
            </label>
          ))}
        </fieldset>
      ) : null}
      <button
        type="button"
        class="primary large"
        disabled={!wallet || busy}
        onClick={async () => {
          if (!wallet) return;
          setBusy(true);
          setError(undefined);
          try {
            await props.onSignIn(wallet);
          } catch (failure) {
            setError(failure);
          } finally {
            setBusy(false);
          }
        }}
      >
        Sign in with Ethereum
      </button>
      {busy ? <p role="status">Check your wallet: approve the connection and sign the message.</p> : null}
      <ErrorNotice error={error} title="Sign-in failed" />
    </section>
  );
}
