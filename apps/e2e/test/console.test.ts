import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatEther, JsonRpcProvider, Wallet, type HDNodeWallet } from 'ethers';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { connectJobRegistry } from '@svc/contracts';
import { freePort } from '@svc/testkit';
import { repoRoot, Stack, type StackFile } from './support/stack.js';
import { injectWallets, type InjectedWallets, type WalletRequestLog } from './support/injected-wallet.js';

// The web console walked in a real browser: Debian's Chromium driven by playwright-core, against one
// `npm start`. The browser wallet extension is stood in for by an injected EIP-1193 provider backed by a
// real ethers wallet on the devnet (support/injected-wallet.ts). Screenshots of every page, at desktop and
// phone widths, are written to apps/e2e/screenshots/ for review.

/** Debian's chromium (`apt-get install chromium`; .ci/run installs it). Never a downloaded browser. */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];
const SCREENSHOTS = join(repoRoot, 'apps/e2e/screenshots');
const DESKTOP = { width: 1280, height: 860 };
const PHONE = { width: 360, height: 760 };
const KEY = /^svc_[0-9A-Za-z]{43}$/;
const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

let stack: Stack | undefined;
let stateDir: string;
let base: string;
let stackFile: StackFile;
let provider: JsonRpcProvider;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`No Chromium at ${CHROMIUM}: install Debian's package (apt-get install -y chromium).`);
  stateDir = mkdtempSync(join(tmpdir(), 'svc-e2e-state-'));
  const port = await freePort();
  base = `http://localhost:${port}`;
  const [started, launched] = await Promise.all([
    Stack.start({ PORT: String(port), STATE_DIR: stateDir, DEVNET_PORT: '0' }),
    chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS }),
  ]);
  stack = started;
  browser = launched;
  stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
  provider = new JsonRpcProvider(stackFile.rpcUrl, stackFile.chainId, {
    staticNetwork: true,
    cacheTimeout: -1,
  });
  mkdirSync(SCREENSHOTS, { recursive: true });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  provider?.destroy();
  await stack?.stopWithin(20_000);
  rmSync(stateDir, { recursive: true, force: true });
}, 40_000);

/** A new devnet wallet with ETH and nothing on JobRegistry: no deposit, no delegate. */
async function freshWallet(): Promise<HDNodeWallet> {
  const funder = new Wallet(stackFile.accounts.at(-1)!.privateKey, provider);
  const wallet = Wallet.createRandom().connect(provider);
  await (await funder.sendTransaction({ to: wallet.address, value: 10n ** 18n })).wait();
  return wallet;
}

interface Console {
  readonly context: BrowserContext;
  readonly page: Page;
  readonly wallets: InjectedWallets;
  readonly walletLog: WalletRequestLog;
}

/**
 * A browser tab with two wallet extensions installed (so the console must offer a choice, EIP-6963): the
 * one under test, which starts on mainnet's chain id and must be asked to switch, and another.
 */
async function openConsole(wallet: HDNodeWallet, options: { fakeClock?: boolean } = {}): Promise<Console> {
  const context = await browser.newContext({ viewport: DESKTOP });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  if (options.fakeClock) await context.clock.install();
  // Whatever the page's policy refuses is recorded, to be asserted empty on every page.
  await context.addInitScript(() => {
    const violations: string[] = [];
    (window as unknown as { __cspViolations: string[] }).__cspViolations = violations;
    document.addEventListener('securitypolicyviolation', (event) =>
      violations.push(`${event.violatedDirective} ${event.blockedURI}`),
    );
  });
  const wallets = await injectWallets(context, [
    { name: 'Other Wallet', wallet: Wallet.createRandom(), provider, startChainId: 1, knownChainIds: [1] },
    { name: 'E2E Wallet', wallet, provider, startChainId: 1, knownChainIds: [1, stackFile.chainId] },
  ]);
  const page = await context.newPage();
  const response = await page.goto(base);
  expect(response?.status()).toBe(200);
  return { context, page, wallets, walletLog: wallets.log };
}

/** Signs in with the wallet under test; the console then shows the page the tab was on (`landing`). */
async function signIn(page: Page, landing = 'API keys'): Promise<void> {
  await page.getByRole('radio', { name: 'E2E Wallet' }).check();
  await page.getByRole('button', { name: 'Sign in with Ethereum' }).click();
  await page.getByRole('heading', { name: landing }).waitFor();
}

/** Both widths of the page as it is now. */
async function screenshots(page: Page, name: string): Promise<void> {
  await page.setViewportSize(DESKTOP);
  await page.screenshot({ path: join(SCREENSHOTS, `console-${name}-desktop.png`), fullPage: true });
  await page.setViewportSize(PHONE);
  await page.screenshot({ path: join(SCREENSHOTS, `console-${name}-phone.png`), fullPage: true });
  // At phone width nothing may overflow sideways (the layout is usable from 360 px up).
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow).toBeLessThanOrEqual(0);
  await page.setViewportSize(DESKTOP);
}

/**
 * The page as it stands passes the checks every page must: every control has an accessible name (in the
 * accessibility tree a control without one shows its role and no quoted name, with or without a value),
 * and the Content-Security-Policy refused nothing.
 */
async function expectSoundPage(page: Page): Promise<void> {
  const tree = await page.locator('body').ariaSnapshot();
  const unnamed = tree
    .split('\n')
    .filter((line) =>
      /^\s*- (button|link|textbox|combobox|radio|checkbox|spinbutton)(\s*\[[^\]]*\])*(:.*)?$/.test(line),
    );
  expect(unnamed).toEqual([]);
  expect(
    await page.evaluate(() => (window as unknown as { __cspViolations: string[] }).__cspViolations),
  ).toEqual([]);
}

const listKeys = async (token: string) =>
  (await (await fetch(`${base}/api/api-keys`, { headers: { authorization: `Bearer ${token}` } })).json()) as {
    id: string;
    prefix: string;
    spendCapWei: string | null;
    revokedAt: string | null;
  }[];
const tokenOf = (page: Page) =>
  page.evaluate(
    () => (JSON.parse(sessionStorage.getItem('svc.console.sign-in') ?? '{}') as { token?: string }).token!,
  );

describe('the web console in a real browser', () => {
  let wallet: HDNodeWallet;
  let tab: Console;
  let playgroundKey: string;

  beforeAll(async () => {
    wallet = await freshWallet();
    tab = await openConsole(wallet);
  }, 60_000);
  afterAll(async () => {
    await tab?.context.close();
  });

  it('is served by the gateway under a strict Content-Security-Policy, assets cached for good', async () => {
    const page = await fetch(base);
    expect(page.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
    expect(page.headers.get('cache-control')).toBe('no-cache');
    const html = await page.text();
    const script = /<script type="module" crossorigin src="(\/assets\/[^"]+\.js)">/.exec(html)?.[1];
    expect(script).toBeDefined();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)/); // no inline script
    const asset = await fetch(`${base}${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    // Nothing the page loads comes from another origin (no CDN).
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
  });

  it('signs in with the wallet: chosen among the announced ones, switched to the service chain, personal_sign', async () => {
    const { page, walletLog } = tab;
    await page.getByRole('button', { name: 'Sign in with Ethereum' }).waitFor();
    await expectSoundPage(page);
    await screenshots(page, 'sign-in');
    await signIn(page);
    const methods = walletLog.filter((entry) => entry.wallet === 'E2E Wallet').map((entry) => entry.method);
    expect(methods.slice(0, 5)).toEqual([
      'eth_requestAccounts',
      'eth_chainId',
      'wallet_switchEthereumChain',
      'eth_chainId',
      'personal_sign',
    ]);
    expect(walletLog.some((entry) => entry.wallet === 'Other Wallet')).toBe(false);
    await page.getByText(/Sign-in expires in (59|60) min/).waitFor();
    // The token is kept for the tab only: sessionStorage, never localStorage.
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(await tokenOf(page)).toMatch(/^ey/);
  });

  it('mints a key, shows it once with a copy button, keyboard only', async () => {
    const { page } = tab;
    await page.getByLabel('Name').focus();
    await page.keyboard.type('playground');
    await page.keyboard.press('Tab'); // the cap
    await page.keyboard.press('Tab'); // Create key
    await page.keyboard.press('Enter');
    const shown = page.getByTestId('minted-key');
    await shown.waitFor();
    playgroundKey = (await shown.textContent())!;
    expect(playgroundKey).toMatch(KEY);
    await page.getByText('It will not be shown again').waitFor();
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByText('Copied to the clipboard.').waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(playgroundKey);
    const row = page.locator(`tr[data-key-prefix="${playgroundKey.slice(0, 11)}"]`);
    await row.getByText('Active').waitFor();
    await expectSoundPage(page);
    await screenshots(page, 'keys-minted');

    await page.getByRole('button', { name: 'Done' }).click();
    await page.getByTestId('minted-key').waitFor({ state: 'detached' });
    expect(await page.content()).not.toContain(playgroundKey);
    await page.reload();
    await page.getByRole('heading', { name: 'API keys' }).waitFor();
    await row.waitFor();
    expect(await page.content()).not.toContain(playgroundKey);
  });

  it('caps a key, removes the cap, revokes it and deletes it, each confirmed by the API', async () => {
    const { page } = tab;
    await page.getByLabel('Name').fill('doomed');
    await page.getByLabel('Spend cap in ETH').fill('0.02');
    await page.getByRole('button', { name: 'Create key' }).click();
    const minted = (await page.getByTestId('minted-key').textContent())!;
    await page.getByRole('button', { name: 'Done' }).click();
    const prefix = minted.slice(0, 11);
    const row = page.locator(`tr[data-key-prefix="${prefix}"]`);
    await row.getByText('0.02 ETH').waitFor();
    const token = await tokenOf(page);
    const listed = async () => (await listKeys(token)).find((key) => key.prefix === prefix)!;
    expect((await listed()).spendCapWei).toBe('20000000000000000');

    await row.getByRole('button', { name: 'Set cap' }).click();
    await row.getByLabel('Cap in ETH').fill('0.05');
    await row.getByRole('button', { name: 'Set cap' }).click();
    await row.getByText('0.05 ETH').waitFor();
    expect((await listed()).spendCapWei).toBe('50000000000000000');

    await row.getByRole('button', { name: 'Remove cap' }).click();
    await row.getByText('No cap').waitFor();
    expect((await listed()).spendCapWei).toBeNull();

    // Escape cancels the confirmation and changes nothing.
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog').waitFor();
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    expect((await listed()).revokedAt).toBeNull();

    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await row.getByText('Revoked').waitFor();
    expect((await listed()).revokedAt).not.toBeNull();
    const unauthorized = await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${minted}` } });
    expect(unauthorized.status).toBe(401);
    await expectSoundPage(page);
    await screenshots(page, 'keys');

    await row.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByText(prefix).waitFor();
    await dialog.getByRole('button', { name: 'Delete' }).click();
    await row.waitFor({ state: 'detached' });
    expect(await listed()).toBeUndefined();
  });

  it('shows an API error with its code and remedy', async () => {
    const { page } = tab;
    // The table is stale: the key was deleted elsewhere (another tab, the CLI).
    await page.getByLabel('Name').fill('deleted elsewhere');
    await page.getByRole('button', { name: 'Create key' }).click();
    const minted = (await page.getByTestId('minted-key').textContent())!;
    await page.getByRole('button', { name: 'Done' }).click();
    const token = await tokenOf(page);
    const id = (await listKeys(token)).find((key) => key.prefix === minted.slice(0, 11))!.id;
    const headers = { authorization: `Bearer ${token}` };
    expect((await fetch(`${base}/api/api-keys/${id}/revoke`, { method: 'POST', headers })).status).toBe(204);
    expect((await fetch(`${base}/api/api-keys/${id}`, { method: 'DELETE', headers })).status).toBe(204);
    const row = page.locator(`tr[data-key-prefix="${minted.slice(0, 11)}"]`);
    await row.getByRole('button', { name: 'Set cap' }).click();
    await row.getByLabel('Cap in ETH').fill('1');
    await row.getByRole('button', { name: 'Set cap' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    await alert.getByText('api_key_not_found').waitFor();
    await alert.getByText('Use an id from GET /api/api-keys.').waitFor();
    // Once the table is loaded again, the row is gone.
    await page.reload();
    await page.locator(`tr[data-key-prefix="${playgroundKey.slice(0, 11)}"]`).waitFor();
    expect(await row.count()).toBe(0);
  });

  it('shows the 402 of a wallet without a delegate, and deposits and authorizes from its accepts entry', async () => {
    const { page } = tab;
    const registry = connectJobRegistry(stackFile.contracts.jobRegistry, provider);
    expect(await registry.isDelegateAuthorized(wallet.address, stackFile.delegate!)).toBe(false);

    await page.getByRole('link', { name: 'Balance' }).click();
    await page.getByTestId('delegate-status').getByText('Not authorized').waitFor();
    await page.getByTestId('prepaid-balance').getByText('0.0 ETH', { exact: true }).waitFor();
    await expectSoundPage(page);

    await page.getByRole('link', { name: 'Playground' }).click();
    await page.getByLabel('API key').fill(playgroundKey);
    // The models of /v1/models, once the key is in.
    const model = page.getByLabel('Model');
    await model.locator('option', { hasText: stackFile.models[0] }).waitFor({ state: 'attached' });
    expect((await model.locator('option').allTextContents()).sort()).toEqual([...stackFile.models].sort());
    await page.getByLabel('Message', { exact: true }).fill('Hello from the console');
    await page.getByRole('button', { name: 'Send' }).click();
    const alert = page.getByRole('alert');
    await alert.getByText('delegate_not_authorized').waitFor();
    await alert.getByText('Send the transaction in error.accepts.').waitFor();
    const deposit = page.getByRole('button', { name: 'Deposit and authorize' });
    await deposit.waitFor();
    // The question waits in the composer to be sent again.
    await expect(page.getByLabel('Message', { exact: true }).inputValue()).resolves.toBe(
      'Hello from the console',
    );
    await expectSoundPage(page);
    await screenshots(page, 'playground-402');

    await page.getByLabel('Amount (ETH)').fill('0.05');
    await deposit.click();
    await page.getByText(/mined in block \d+/).waitFor({ timeout: 30_000 });
    expect(await registry.isDelegateAuthorized(wallet.address, stackFile.delegate!)).toBe(true);
    expect(await registry.prepaidBalanceOf(wallet.address)).toBe(5n * 10n ** 16n);
    expect(await registry.delegateAllowance(wallet.address, stackFile.delegate!)).toBe(5n * 10n ** 16n);
  });

  it('streams an answer in the playground and shows its on-chain job', async () => {
    const { page } = tab;
    await page.getByRole('button', { name: 'Send' }).click();
    const answer = page.getByTestId('answer').last();
    await answer.and(page.locator('[aria-busy="false"]')).waitFor({ timeout: 60_000 });
    expect(await answer.textContent()).toMatch(/You said: Hello from the console/);
    const service = page.getByTestId('service').last();
    const job = (await service.locator('dd').first().textContent())!;
    expect(job).toMatch(/^\d+$/);
    const txHash = (await service.locator('dd code').first().getAttribute('title'))!;
    expect(txHash).toMatch(/^0x[0-9a-f]{64}$/);
    const receipt = await provider.getTransactionReceipt(txHash);
    expect(receipt?.to?.toLowerCase()).toBe(stackFile.contracts.jobRegistry.toLowerCase());
    await screenshots(page, 'playground');

    await page.getByRole('link', { name: 'Balance' }).click();
    await page.getByTestId('delegate-status').getByText('Authorized').waitFor();
    const registry = connectJobRegistry(stackFile.contracts.jobRegistry, provider);
    const prepaid = `${formatEther(await registry.prepaidBalanceOf(wallet.address))} ETH`;
    await page.getByTestId('prepaid-balance').getByText(prepaid, { exact: true }).waitFor();
    await expectSoundPage(page);
    await screenshots(page, 'balance');

    // The balance page's own deposit: the same depositAndAuthorize, any amount.
    const before = await registry.prepaidBalanceOf(wallet.address);
    await page.getByLabel('Amount (ETH)').fill('0.01');
    await page.getByRole('button', { name: 'Deposit and authorize' }).click();
    await page.getByText(/mined in block \d+/).waitFor({ timeout: 30_000 });
    expect(await registry.prepaidBalanceOf(wallet.address)).toBe(before + 10n ** 16n);
    const after = `${formatEther(before + 10n ** 16n)} ETH`;
    await page.getByTestId('prepaid-balance').getByText(after, { exact: true }).waitFor();
  }, 90_000);

  it('goes back to sign-in when the server refuses the token', async () => {
    const { page } = tab;
    await page.evaluate(() => {
      const saved = JSON.parse(sessionStorage.getItem('svc.console.sign-in')!) as { token: string };
      sessionStorage.setItem('svc.console.sign-in', JSON.stringify({ ...saved, token: `${saved.token}x` }));
      window.location.hash = '#/keys';
    });
    await page.reload();
    await page.getByRole('button', { name: 'Sign in with Ethereum' }).waitFor();
    await page.getByText(/no longer valid/).waitFor();
  });
});

describe('sign-in edge cases', () => {
  it('tells the user to add the chain when the wallet does not know it, and signs nothing', async () => {
    const { context, page, walletLog } = await openConsole(await freshWallet());
    try {
      await page.getByRole('radio', { name: 'Other Wallet' }).check();
      await page.getByRole('button', { name: 'Sign in with Ethereum' }).click();
      await page.getByRole('alert').getByText(`does not know chain ${stackFile.chainId}`).waitFor();
      expect(walletLog.map((entry) => entry.method)).not.toContain('personal_sign');
      expect(walletLog.every((entry) => entry.wallet === 'Other Wallet')).toBe(true);
    } finally {
      await context.close();
    }
  }, 60_000);

  it('signs out when the wallet switches to another account, and forgets the key it held', async () => {
    const first = await freshWallet();
    const { context, page, wallets } = await openConsole(first);
    try {
      await signIn(page);
      await page.getByRole('button', { name: 'Create key' }).click();
      await page.getByRole('button', { name: 'Try it in the playground' }).click();
      await page.getByRole('heading', { name: 'Playground' }).waitFor();
      expect(await page.getByLabel('API key').inputValue()).toMatch(KEY);

      await wallets.switchAccount(page, 'E2E Wallet', Wallet.createRandom());
      await page.getByText('Your wallet switched to another account.', { exact: false }).waitFor();
      expect(await page.evaluate(() => sessionStorage.getItem('svc.console.sign-in'))).toBeNull();
      // Signed in again as the other account, back on the playground, without the first wallet's key.
      await signIn(page, 'Playground');
      expect(await page.getByLabel('API key').inputValue()).toBe('');
      await expectSoundPage(page);
    } finally {
      await context.close();
    }
  }, 60_000);

  it('a lapsed sign-in leads back to sign-in, and signing in again works', async () => {
    const wallet = await freshWallet();
    const { context, page } = await openConsole(wallet, { fakeClock: true });
    try {
      await signIn(page);
      await context.clock.fastForward('01:00:01');
      await page.getByRole('button', { name: 'Sign in with Ethereum' }).waitFor();
      await page.getByText('Your sign-in lapsed. Sign in again to go on.').waitFor();
      expect(await page.evaluate(() => sessionStorage.getItem('svc.console.sign-in'))).toBeNull();
      await screenshots(page, 'sign-in-lapsed');
      await signIn(page);
      await page.getByText(/Sign-in expires in (59|60) min/).waitFor();
    } finally {
      await context.close();
    }
  }, 60_000);
});
