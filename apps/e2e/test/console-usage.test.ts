import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JsonRpcProvider, Wallet } from 'ethers';
import { chromium, type Browser, type Page } from 'playwright-core';
import { paymentSignatureForAnswer } from '@svc/x402';
import { freePort, waitUntil } from '@svc/testkit';
import { repoRoot, signIn, Stack, type StackFile } from './support/stack.js';
import { injectWallets } from './support/injected-wallet.js';

// The console's Usage page walked in Debian's Chromium after real calls against one `npm start`: calls
// with two keys of the demo wallet and one paid per call, then the page's spend chart, outcomes and list,
// a job's transaction, the key filter and paging. Screenshots go to apps/e2e/screenshots/ (and
// USAGE_SCREENSHOT_DIR, when set, for a look outside the checkout).

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];
const SCREENSHOTS = join(repoRoot, 'apps/e2e/screenshots');
const DESKTOP = { width: 1280, height: 860 };
const PHONE = { width: 360, height: 760 };

let stack: Stack | undefined;
let stateDir: string;
let base: string;
let stackFile: StackFile;
let provider: JsonRpcProvider;
let browser: Browser;

beforeAll(async () => {
  stateDir = mkdtempSync(join(tmpdir(), 'svc-e2e-state-'));
  const port = await freePort();
  base = `http://localhost:${port}`;
  // Settled both before failing, so a browser that cannot start leaves no stack running behind.
  const [started, launched] = await Promise.allSettled([
    Stack.start({ PORT: String(port), STATE_DIR: stateDir, DEVNET_PORT: '0' }),
    chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_FLAGS }),
  ]);
  if (started.status === 'fulfilled') stack = started.value;
  if (launched.status === 'fulfilled') browser = launched.value;
  if (started.status === 'rejected') throw started.reason;
  if (launched.status === 'rejected') throw launched.reason;
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

/** `GET /api/usage` as far as this walk reads it (docs/api.md, Usage). */
interface UsageListJson {
  data: Array<{
    jobId: string | null;
    keyId: string | null;
    txHash: string | null;
    payment: string;
    outcome: string;
    totalTimeMs: number | null;
  }>;
}

interface ServiceObject {
  job_id: string;
  tx_hash: string;
}

async function complete(headers: Record<string, string>, content: string, stream = false): Promise<Response> {
  return fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({
      model: stackFile.models[0],
      messages: [{ role: 'user', content }],
      ...(stream ? { stream: true } : {}),
    }),
  });
}

async function answered(apiKey: string, content: string): Promise<ServiceObject> {
  const response = await complete({ authorization: `Bearer ${apiKey}` }, content);
  expect(response.status).toBe(200);
  return ((await response.json()) as { service: ServiceObject }).service;
}

async function screenshots(page: Page, name: string): Promise<void> {
  const dirs = [SCREENSHOTS, ...(process.env.USAGE_SCREENSHOT_DIR ? [process.env.USAGE_SCREENSHOT_DIR] : [])];
  await page.setViewportSize(DESKTOP);
  for (const dir of dirs)
    await page.screenshot({ path: join(dir, `console-${name}-desktop.png`), fullPage: true });
  await page.setViewportSize(PHONE);
  for (const dir of dirs)
    await page.screenshot({ path: join(dir, `console-${name}-phone.png`), fullPage: true });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  expect(overflow).toBeLessThanOrEqual(0);
  await page.setViewportSize(DESKTOP);
}

describe('the Usage page of the console', () => {
  it('shows spend per day per key, calls by outcome and each call with its job and transaction', async () => {
    const demo = new Wallet(stackFile.demoWallet!.privateKey, provider);
    const { token } = await signIn(base, demo);
    const mint = async (name: string) => {
      const response = await fetch(`${base}/api/api-keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name }),
      });
      expect(response.status).toBe(201);
      return (await response.json()) as { id: string; key: string; prefix: string };
    };
    const alpha = await mint('alpha');
    const beta = await mint('beta');

    // Calls: three with alpha (one streamed), one with beta, one paid per call with no key.
    const first = await answered(alpha.key, 'usage one');
    await answered(alpha.key, 'usage two');
    const streamed = await complete({ authorization: `Bearer ${alpha.key}` }, 'usage streamed', true);
    expect(streamed.status).toBe(200);
    expect(await streamed.text()).toContain('[DONE]');
    const betaCall = await answered(beta.key, 'usage beta');
    const refused = await complete({}, 'usage per call');
    expect(refused.status).toBe(402);
    const paid = await complete(
      { 'payment-signature': await paymentSignatureForAnswer(demo, refused.headers) },
      'usage per call',
    );
    expect(paid.status).toBe(200);

    // The usage is written from the calls' lifecycle events: wait until the five have ended there.
    const usage = await waitUntil(
      async () =>
        (await (
          await fetch(`${base}/api/usage`, { headers: { authorization: `Bearer ${token}` } })
        ).json()) as UsageListJson,
      (listed) =>
        listed.data.filter((record) => record.outcome === 'answered' && record.totalTimeMs !== null).length >=
        5,
      { what: 'five answered calls in the usage', timeoutMs: 30_000, intervalMs: 500 },
    );
    const firstRecord = usage.data.find((record) => record.jobId === first.job_id);
    expect(firstRecord).toMatchObject({ keyId: alpha.id, txHash: first.tx_hash, payment: 'api_key' });
    expect(
      usage.data.filter((record) => record.payment === 'per_call' && record.keyId === null),
    ).toHaveLength(1);

    // The page, in a browser with the demo wallet installed.
    const context = await browser.newContext({ viewport: DESKTOP });
    await context.addInitScript(() => {
      const violations: string[] = [];
      (window as unknown as { __cspViolations: string[] }).__cspViolations = violations;
      document.addEventListener('securitypolicyviolation', (event) =>
        violations.push(`${event.violatedDirective} ${event.blockedURI}`),
      );
    });
    await injectWallets(context, [
      {
        name: 'E2E Wallet',
        wallet: demo,
        provider,
        startChainId: stackFile.chainId,
        knownChainIds: [stackFile.chainId],
      },
    ]);
    const page = await context.newPage();
    await page.goto(`${base}/#/usage`);
    await page.getByRole('button', { name: 'Sign in with Ethereum' }).click();
    await page.getByRole('heading', { name: 'Usage', level: 1 }).waitFor();

    // Spend per day per key: a bar per day, a segment per key, a legend naming the keys.
    const chart = page.getByTestId('spend-chart');
    await chart.waitFor();
    expect(await chart.locator('rect').count()).toBeGreaterThanOrEqual(3);
    const legend = page.locator('.legend');
    await expect(legend.textContent()).resolves.toContain(`alpha (${alpha.prefix})`);
    await expect(legend.textContent()).resolves.toContain(`beta (${beta.prefix})`);
    await expect(legend.textContent()).resolves.toContain('Per-call payments');
    // Calls by outcome.
    const outcomes = page.getByTestId('outcomes');
    expect((await outcomes.textContent())?.replace(/\s+/g, '')).toContain('answered5');

    // The list, newest first, each job opening to the transaction that submitted it.
    const rows = page.locator('table.usage tbody tr');
    expect(await rows.count()).toBe(5);
    const firstRow = page.locator(`tr:has(summary:text-is("Job ${first.job_id}"))`);
    await firstRow.getByText(`Job ${first.job_id}`).click();
    await expect(firstRow.getByTestId('usage-tx').textContent()).resolves.toBe(first.tx_hash);
    expect(await firstRow.locator('td[data-label="Key"]').textContent()).toBe(`alpha (${alpha.prefix})`);
    expect(await firstRow.locator('td[data-label="Outcome"]').textContent()).toContain('answered');
    expect(await firstRow.locator('td[data-label="Total"]').textContent()).toMatch(/\d+(\.\d+)? m?s/);

    // Sound: every control named, nothing refused by the Content-Security-Policy.
    const tree = await page.locator('body').ariaSnapshot();
    const unnamed = tree
      .split('\n')
      .filter((line) =>
        /^\s*- (button|link|textbox|combobox|radio|checkbox)(\s*\[[^\]]*\])*(:.*)?$/.test(line),
      );
    expect(unnamed).toEqual([]);
    expect(
      await page.evaluate(() => (window as unknown as { __cspViolations: string[] }).__cspViolations),
    ).toEqual([]);
    await screenshots(page, 'usage');

    // The key filter: beta's one call only.
    await page.getByRole('combobox', { name: 'Key' }).selectOption(beta.id);
    await page.locator(`tr:has(summary:text-is("Job ${betaCall.job_id}"))`).waitFor();
    await waitUntil(
      () => rows.count(),
      (count) => count === 1,
      { what: 'the key filter applied' },
    );
    await context.close();
  }, 180_000);
});
