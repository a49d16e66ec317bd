import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import type { UsageListJson, UsageRecordJson } from '@svc/api';
import { CredentialStore } from '../src/credentials.js';
import { CliError, EXIT } from '../src/errors.js';
import { runCli } from '../src/program.js';
import {
  formatEther,
  parseUsageLimit,
  parseUsageTime,
  renderUsage,
  shortHash,
  usageSummary,
  usageTable,
} from '../src/usage.js';

const TX = '0x9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a0';
const WALLET = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';

function record(fields: Partial<UsageRecordJson> = {}): UsageRecordJson {
  return {
    id: 'call-1',
    time: '2026-11-26T13:04:56.789Z',
    keyId: 'key-a',
    payer: WALLET,
    payment: 'api_key',
    model: 'llama3.2:1b',
    outcome: 'answered',
    jobId: '17',
    sessionId: '3',
    txHash: TX,
    worker: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
    feeWei: '100000000000000',
    droppedMessages: 0,
    timeToFirstTokenMs: 412,
    totalTimeMs: 1830,
    ...fields,
  };
}

function usageMessage(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).exitCode).toBe(EXIT.usage);
    return (error as CliError).message;
  }
  throw new Error('accepted');
}

describe('parseUsageTime', () => {
  const now = new Date('2026-11-26T12:00:00.000Z');

  it('reads a duration back from now', () => {
    expect(parseUsageTime('24h', '--since', now)).toBe('2026-11-25T12:00:00.000Z');
    expect(parseUsageTime('7d', '--since', now)).toBe('2026-11-19T12:00:00.000Z');
    expect(parseUsageTime('30m', '--since', now)).toBe('2026-11-26T11:30:00.000Z');
    expect(parseUsageTime('90s', '--since', now)).toBe('2026-11-26T11:58:30.000Z');
    expect(parseUsageTime('2w', '--since', now)).toBe('2026-11-12T12:00:00.000Z');
    expect(parseUsageTime(' 1H ', '--since', now)).toBe('2026-11-26T11:00:00.000Z');
  });

  it('passes an ISO 8601 time with a zone, or a date, as given', () => {
    for (const text of [
      '2026-11-26',
      '2026-11-26T09:00Z',
      '2026-11-26T09:00:00Z',
      '2026-11-26T09:00:00.123456789Z',
      '2026-11-26T09:00:00+02:00',
      '2026-02-28T23:59:59-05:30',
    ])
      expect(parseUsageTime(text, '--since', now)).toBe(text);
  });

  it('refuses a time without a zone, a day the calendar lacks, and anything else, naming the option', () => {
    for (const text of [
      '2026-11-26T09:00:00',
      '2026-11-26 09:00Z',
      '2026-02-30',
      '2026-13-01',
      '2026-11-26T25:00Z',
      '24 h',
      '-1d',
      '1y',
      'yesterday',
      '',
    ])
      expect(usageMessage(() => parseUsageTime(text, '--since', now))).toMatch(
        /^--since ".*" is not a time: an ISO 8601 time with a zone \(2026-11-26T09:00:00Z\), a date \(2026-11-26, midnight UTC\), or a duration back from now \(30m, 24h, 7d, 2w\)$/,
      );
    expect(usageMessage(() => parseUsageTime('soon', '--until', now))).toMatch(/^--until "soon"/);
  });
});

describe('parseUsageLimit', () => {
  it('takes a whole number from 1 to 200', () => {
    expect(parseUsageLimit('1')).toBe(1);
    expect(parseUsageLimit('200')).toBe(200);
    for (const text of ['0', '201', '1.5', '-1', 'ten', ''])
      expect(usageMessage(() => parseUsageLimit(text))).toBe(
        `--limit "${text}" is not a whole number from 1 to 200`,
      );
  });
});

describe('formatEther and shortHash', () => {
  it('shows wei as ether without a trailing .0', () => {
    expect(formatEther('0')).toBe('0');
    expect(formatEther('1000000000000000000')).toBe('1');
    expect(formatEther('100000000000000')).toBe('0.0001');
    expect(formatEther(1500n)).toBe('0.0000000000000015');
    expect(formatEther('2500000000000000000')).toBe('2.5');
  });

  it('keeps the head and tail of a transaction hash', () => {
    expect(shortHash(TX)).toBe('0x9f8e7d…b1a0');
    expect(shortHash('0x1234')).toBe('0x1234');
  });
});

describe('the usage table and summary', () => {
  const list: UsageListJson = {
    data: [
      record({
        id: 'call-3',
        time: '2026-11-26T13:05:10.000Z',
        outcome: 'pending',
        feeWei: null,
        totalTimeMs: null,
        timeToFirstTokenMs: null,
      }),
      record({ id: 'call-2', keyId: null, payment: 'per_call', model: 'qwen2.5:0.5b', jobId: '18' }),
      record({
        outcome: 'no_worker_available',
        jobId: null,
        txHash: null,
        feeWei: '0',
        timeToFirstTokenMs: null,
        totalTimeMs: 95,
      }),
    ],
    nextCursor: null,
    summary: {
      days: [
        { day: '2026-11-26', keyId: 'key-a', spentWei: '100000000000000', calls: 2 },
        { day: '2026-11-26', keyId: null, spentWei: '100000000000000', calls: 1 },
      ],
      outcomes: [
        { outcome: 'answered', calls: 1 },
        { outcome: 'pending', calls: 1 },
        { outcome: 'no_worker_available', calls: 1 },
      ],
    },
  };

  it('prints a row per call: time, key or per call, model, outcome, fee in ETH, timings, job, short tx', () => {
    expect(usageTable(list.data).split('\n')).toEqual([
      'TIME (UTC)           KEY       MODEL         OUTCOME              FEE (ETH)  FIRST/TOTAL MS  JOB  TX',
      '2026-11-26 13:05:10  key-a     llama3.2:1b   pending              escrowed   -/-             17   0x9f8e7d…b1a0',
      '2026-11-26 13:04:56  per call  qwen2.5:0.5b  answered             0.0001     412/1830        18   0x9f8e7d…b1a0',
      '2026-11-26 13:04:56  key-a     llama3.2:1b   no_worker_available  0          -/95            -    -',
    ]);
  });

  it("names a key's call paid per call by another wallet", () => {
    expect(usageTable([record({ payment: 'per_call' })])).toContain('key-a (per call)');
  });

  it("sums the API's summary: calls by outcome and the spend of every page", () => {
    expect(usageSummary(list)).toBe(
      '3 calls (1 answered, 1 pending, 1 no_worker_available), spent 200000000000000 wei (0.0002 ETH).',
    );
    expect(usageSummary({ ...list, summary: null })).toBe(
      '3 calls (1 pending, 1 answered, 1 no_worker_available), spent 100000000000000 wei (0.0001 ETH).',
    );
  });

  it('says what the query covers, and when more pages follow', () => {
    const text = renderUsage(
      { ...list, nextCursor: 'next' },
      { key: 'key-a', since: '2026-11-25T12:00:00.000Z' },
    );
    const lines = text.split('\n');
    expect(lines).toHaveLength(7);
    expect(lines[4]).toBe('');
    expect(lines[5]).toMatch(/^3 calls with key key-a since 2026-11-25T12:00:00\.000Z \(1 answered, /);
    expect(lines[6]).toBe('Showing the newest 3 of 3: --all lists every one (--limit: up to 200 a page).');
  });

  it('says when there is nothing to list', () => {
    const empty: UsageListJson = { data: [], nextCursor: null, summary: { days: [], outcomes: [] } };
    expect(renderUsage(empty)).toBe(
      'No calls yet: a call is listed once the service accepts it (svc chat, svc pay).',
    );
    expect(renderUsage(empty, { key: 'k', since: '2026-11-26' })).toBe(
      'No calls with key k since 2026-11-26.',
    );
  });
});

describe('svc usage against a service', () => {
  let root: string;
  let server: Server;
  let baseUrl: string;
  let requests: URL[];
  let authorizations: (string | undefined)[];
  /** The pages the fake service answers, by cursor ('' for the first). */
  let pages: Record<string, UsageListJson>;
  let refusal: { status: number; body: unknown } | undefined;
  let stdout: string;
  let stderr: string;

  beforeEach(async () => {
    root = mkdtempSync(join(tmpdir(), 'svc-usage-'));
    requests = [];
    authorizations = [];
    refusal = undefined;
    const summary = {
      days: [{ day: '2026-11-26', keyId: 'key-a', spentWei: '300000000000000', calls: 3 }],
      outcomes: [{ outcome: 'answered', calls: 3 }],
    };
    pages = {
      '': {
        data: [record({ id: 'c3', jobId: '3' }), record({ id: 'c2', jobId: '2' })],
        nextCursor: 'p2',
        summary,
      },
      p2: { data: [record({ id: 'c1', jobId: '1' })], nextCursor: null, summary: null },
    };
    server = createServer((req, res) => {
      const url = new URL(req.url!, 'http://service');
      requests.push(url);
      authorizations.push(req.headers.authorization);
      res.setHeader('content-type', 'application/json');
      if (refusal) {
        res.statusCode = refusal.status;
        res.end(JSON.stringify(refusal.body));
        return;
      }
      res.end(JSON.stringify(pages[url.searchParams.get('cursor') ?? '']));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address() as { port: number };
    baseUrl = `http://127.0.0.1:${address.port}`;
    new CredentialStore(env()).saveSignIn(baseUrl, {
      address: WALLET,
      token: 'sign-in-token',
      expiresAt: new Date(Date.now() + 3_600_000).toISOString(),
    });
    stdout = '';
    stderr = '';
    jest.spyOn(process.stdout, 'write').mockImplementation((chunk: unknown) => {
      stdout += String(chunk);
      return true;
    });
    jest.spyOn(process.stderr, 'write').mockImplementation((chunk: unknown) => {
      if (!/^\(node:\d+\) /.test(String(chunk))) stderr += String(chunk);
      return true;
    });
  });

  afterEach(async () => {
    jest.restoreAllMocks();
    await new Promise((resolve) => server.close(resolve));
    rmSync(root, { recursive: true, force: true });
  });

  function env(): NodeJS.ProcessEnv {
    return { STATE_DIR: join(root, 'state'), SVC_CONFIG_DIR: join(root, 'config'), SVC_BASE_URL: baseUrl };
  }

  it('asks GET /api/usage with the sign-in token and prints the newest page as a table', async () => {
    expect(await runCli(['usage'], env())).toBe(EXIT.ok);
    expect(requests.map((url) => `${url.pathname}${url.search}`)).toEqual(['/api/usage']);
    expect(authorizations).toEqual(['Bearer sign-in-token']);
    const lines = stdout.split('\n');
    expect(lines[0]).toMatch(/^TIME \(UTC\) +KEY +MODEL +OUTCOME +FEE \(ETH\) +FIRST\/TOTAL MS +JOB +TX$/);
    expect(lines.slice(1, 3).map((line) => line.split(/ {2,}/)[6])).toEqual(['3', '2']);
    expect(stdout).toContain('3 calls (3 answered), spent 300000000000000 wei (0.0003 ETH).');
    expect(stdout).toContain('Showing the newest 2 of 3: --all lists every one');
    expect(stderr).toBe('');
  });

  it('sends --key, --since, --until and --limit as the query, and with --all follows the cursor', async () => {
    const before = Date.now();
    expect(
      await runCli(
        [
          '--json',
          'usage',
          '--key',
          'key-a',
          '--since',
          '24h',
          '--until',
          '2099-01-01',
          '--limit',
          '2',
          '--all',
        ],
        env(),
      ),
    ).toBe(EXIT.ok);
    expect(requests).toHaveLength(2);
    const [first, second] = requests;
    expect(first!.searchParams.get('key')).toBe('key-a');
    expect(first!.searchParams.get('limit')).toBe('2');
    expect(first!.searchParams.get('to')).toBe('2099-01-01');
    const from = Date.parse(first!.searchParams.get('from')!);
    expect(Math.abs(before - 86_400_000 - from)).toBeLessThan(5_000);
    expect(first!.searchParams.has('cursor')).toBe(false);
    expect(Object.fromEntries(second!.searchParams)).toEqual({
      ...Object.fromEntries(first!.searchParams),
      cursor: 'p2',
    });
    const printed = JSON.parse(stdout) as UsageListJson;
    expect(printed.data.map((call) => call.id)).toEqual(['c3', 'c2', 'c1']);
    expect(printed.nextCursor).toBeNull();
    expect(printed.summary).toEqual(pages['']!.summary);
  });

  it('with --json and no --all prints the page as the API answered it', async () => {
    expect(await runCli(['usage', '--json'], env())).toBe(EXIT.ok);
    expect(JSON.parse(stdout)).toEqual(pages['']);
    expect(stderr).toBe('');
  });

  it('answers 2 to a bad --since, --limit or --key, or --since after --until, before anything is sent', async () => {
    expect(await runCli(['usage', '--since', 'yesterday'], env())).toBe(EXIT.usage);
    expect(stderr).toMatch(/^svc: --since "yesterday" is not a time: .*\(30m, 24h, 7d, 2w\)\.\n$/);
    expect(await runCli(['usage', '--limit', '500'], env())).toBe(EXIT.usage);
    expect(await runCli(['usage', '--key', ' '], env())).toBe(EXIT.usage);
    expect(await runCli(['usage', '--since', '2026-11-26', '--until', '2026-11-25'], env())).toBe(EXIT.usage);
    expect(stderr).toContain('svc: --since 2026-11-26 is after --until 2026-11-25.');
    expect(requests).toEqual([]);
    expect(stdout).toBe('');
  });

  it("reports the API's refusal in the CLI's style", async () => {
    refusal = {
      status: 400,
      body: { error: 'invalid_request', message: 'cursor must be a nextCursor of this listing.' },
    };
    expect(await runCli(['usage'], env())).toBe(EXIT.refused);
    expect(stderr).toMatch(/^svc: invalid_request: cursor must be a nextCursor of this listing\. /);
    stderr = '';
    refusal = { status: 401, body: { error: 'unauthorized', message: 'The sign-in token is not valid.' } };
    expect(await runCli(['usage'], env())).toBe(EXIT.credentials);
    expect(stderr).toBe('svc: unauthorized: The sign-in token is not valid. Run: svc login\n');
  });
});
