import { useCallback, useEffect, useState } from 'preact/hooks';
import type { ChainJson } from '@svc/api';
import type { ServiceError } from './api/api-error.js';
import type { DelegateAccepts } from './api/delegate-accepts.js';
import { serviceApi } from './api/service-api.js';
import { ErrorNotice } from './views/error-notice.js';
import { KeysView } from './views/keys-view.js';
import { SessionStatus } from './views/session-status.js';
import { SignInView } from './views/sign-in-view.js';
import { discoverWallets, type InjectedWallet } from './wallet/wallet-discovery.js';
import { restoreSession, saveSession, sessionOf, type SignInSession } from './wallet/sign-in-session.js';
import { signIn } from './wallet/wallet-sign-in.js';

const PAGES = [
  { route: 'keys', title: 'API keys' },
  { route: 'usage', title: 'Usage' },
  { route: 'balance', title: 'Balance' },
  { route: 'playground', title: 'Playground' },
] as const;
type Route = (typeof PAGES)[number]['route'];

// The balance and playground pages load on first visit: they carry the chain client and the stream
// reader, which sign-in and the keys page do not need.
const loadBalanceView = () => import('./views/balance-view.js');
const loadPlaygroundView = () => import('./views/playground-view.js');
const loadUsageView = () => import('./views/usage-view.js');

/** A page's module, loaded once it is wanted; the failure to load it (a redeploy's missing chunk, say). */
function useLoaded<T>(load: () => Promise<T>, wanted: boolean): { module?: T; error?: unknown } {
  const [state, setState] = useState<{ module?: T; error?: unknown }>({});
  useEffect(() => {
    if (wanted && !state.module)
      load().then(
        (module) => setState({ module }),
        (error: unknown) => setState({ error }),
      );
  }, [wanted, state.module, load]);
  return state;
}

function PageLoading({ error }: { error: unknown }) {
  return error ? (
    <ErrorNotice error={error} title="This page could not be loaded; reload to try again" />
  ) : (
    <p aria-busy="true">Loading…</p>
  );
}

function routeOf(hash: string): Route {
  const route = hash.replace(/^#\/?/, '');
  return PAGES.find((page) => page.route === route)?.route ?? 'keys';
}

export function App() {
  const [wallets, setWallets] = useState<readonly InjectedWallet[]>([]);
  const [session, setSession] = useState<SignInSession | undefined>(() => restoreSession());
  const [notice, setNotice] = useState<string>();
  const [route, setRoute] = useState<Route>(() => routeOf(window.location.hash));
  const [chain, setChain] = useState<ChainJson>();
  const [chainError, setChainError] = useState<unknown>();
  // The last key minted or pasted: in memory only, gone with the tab, never stored.
  const [apiKey, setApiKey] = useState('');
  const [refusal, setRefusal] = useState<DelegateAccepts>();

  useEffect(() => discoverWallets(setWallets), []);
  useEffect(() => {
    // Only `#/page` hashes are routes: the skip link's `#main` moves focus, not the page.
    const onHashChange = () => {
      if (window.location.hash.startsWith('#/')) setRoute(routeOf(window.location.hash));
    };
    window.addEventListener('hashchange', onHashChange);
    return () => window.removeEventListener('hashchange', onHashChange);
  }, []);
  useEffect(() => {
    serviceApi.chain().then(setChain, setChainError);
  }, []);

  // The wallet that signed in, and no other: with several installed, reads and deposits must not go
  // through one that speaks for another address.
  const wallet = session ? wallets.find((candidate) => candidate.id === session.walletId) : undefined;
  const balancePage = useLoaded(loadBalanceView, session !== undefined && route === 'balance');
  const playgroundPage = useLoaded(loadPlaygroundView, session !== undefined && route === 'playground');
  const BalanceView = balancePage.module?.BalanceView;
  const PlaygroundView = playgroundPage.module?.PlaygroundView;
  const usagePage = useLoaded(loadUsageView, session !== undefined && route === 'usage');
  const UsageView = usagePage.module?.UsageView;

  const signOut = useCallback((why?: string) => {
    saveSession(undefined);
    setSession(undefined);
    setNotice(why);
    // What belonged to the wallet that signed out: its key and the refusal waiting for its deposit.
    setApiKey('');
    setRefusal(undefined);
  }, []);
  const onUnauthorized = useCallback(
    (error: ServiceError) => signOut(`Your sign-in is no longer valid (${error.message}). Sign in again.`),
    [signOut],
  );

  // A wallet on another account no longer speaks for the signed-in address: checked when the wallet is
  // found (a reload restores the session without the wallet saying anything) and on every account change.
  // No account at all (a locked wallet) is not another account: the keys need only the token.
  const address = session?.address;
  useEffect(() => {
    const provider = wallet?.provider;
    if (!provider || !address) return;
    const check = (accounts: unknown) => {
      const current = Array.isArray(accounts) && typeof accounts[0] === 'string' ? accounts[0] : undefined;
      if (current !== undefined && current.toLowerCase() !== address.toLowerCase())
        signOut('Your wallet switched to another account. Sign in with it to manage its keys.');
    };
    provider.request({ method: 'eth_accounts' }).then(check, () => undefined);
    const onAccounts = (...args: unknown[]) => check(args[0]);
    provider.on?.('accountsChanged', onAccounts);
    return () => provider.removeListener?.('accountsChanged', onAccounts);
  }, [wallet, address, signOut]);

  if (!session)
    return (
      <Layout>
        <SignInView
          wallets={wallets}
          notice={notice}
          onSignIn={async (chosen) => {
            const signedIn = sessionOf(await signIn(chosen.provider), chosen.id);
            saveSession(signedIn);
            setNotice(undefined);
            setSession(signedIn);
          }}
        />
      </Layout>
    );

  return (
    <Layout
      header={
        <>
          <nav aria-label="Console">
            {PAGES.map((page) => (
              <a
                key={page.route}
                href={`#/${page.route}`}
                aria-current={page.route === route ? 'page' : undefined}
              >
                {page.title}
              </a>
            ))}
          </nav>
          <SessionStatus
            session={session}
            onSignOut={() => signOut('Signed out.')}
            onLapsed={() => signOut('Your sign-in lapsed. Sign in again to go on.')}
          />
        </>
      }
    >
      {route === 'keys' ? (
        <KeysView
          token={session.token}
          onUnauthorized={onUnauthorized}
          onUseKey={(key) => {
            setApiKey(key);
            window.location.hash = '#/playground';
          }}
        />
      ) : null}
      {route === 'usage' ? (
        UsageView ? (
          <UsageView
            token={session.token}
            {...(chain ? { chainId: chain.chainId } : {})}
            onUnauthorized={onUnauthorized}
          />
        ) : (
          <PageLoading error={usagePage.error} />
        )
      ) : null}
      {route === 'balance' ? (
        chain && wallet && BalanceView ? (
          <BalanceView
            provider={wallet.provider}
            chain={chain}
            address={session.address}
            refusal={refusal && sameAddress(refusal.payer, session.address) ? refusal : undefined}
            onFunded={() => setRefusal(undefined)}
          />
        ) : (
          <section aria-labelledby="balance-title">
            <h1 id="balance-title">Balance</h1>
            {chainError ? (
              <ErrorNotice error={chainError} title="Could not learn the service's chain" />
            ) : wallet ? (
              <PageLoading error={balancePage.error} />
            ) : (
              <p class="notice notice-error">
                The wallet you signed in with is not available here: enable it and reload the page, or sign
                out and sign in with another.
              </p>
            )}
          </section>
        )
      ) : null}
      {route === 'playground' ? (
        PlaygroundView ? (
          <PlaygroundView
            apiKey={apiKey}
            onApiKey={setApiKey}
            wallet={wallet ? { provider: wallet.provider, address: session.address } : undefined}
            refusal={refusal}
            onRefusal={setRefusal}
          />
        ) : (
          <PageLoading error={playgroundPage.error} />
        )
      ) : null}
    </Layout>
  );
}

function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}

function Layout(props: { header?: preact.ComponentChildren; children: preact.ComponentChildren }) {
  return (
    <>
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">svc console</span>
        {props.header}
      </header>
      <main id="main" tabIndex={-1}>
        {props.children}
      </main>
    </>
  );
}
