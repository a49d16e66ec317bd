import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { levelOf, openLogFile, parseLogLine, prettyLogLines } from '../src/launcher/log-view.js';
import { START_UP_STAGES, StartUpProgress, type Stage } from '../src/launcher/start-up-stages.js';
import { startUpSummary } from '../src/launcher/summary.js';
import type { StackFile } from '../src/stack-file-format.js';

describe('StartUpProgress', () => {
  const titles = (stages: readonly Stage[]) => stages.map((stage) => stage.title);
  const [chain, database, services, workers] = START_UP_STAGES.map((stage) => stage.title);

  it('finishes the stages in order, each by its log message', () => {
    const progress = new StartUpProgress();
    expect(progress.current?.title).toBe(chain);
    expect(titles(progress.advance({ level: 30, service: 'runner', msg: 'devnet deployed' }))).toEqual([
      chain,
    ]);
    expect(progress.current?.title).toBe(database);
    expect(titles(progress.advance({ msg: 'database migrations checked' }))).toEqual([database]);
    expect(titles(progress.advance({ msg: 'gateway listening' }))).toEqual([services]);
    expect(progress.complete).toBe(false);
    expect(titles(progress.advance({ msg: 'all started' }))).toEqual([workers]);
    expect(progress.complete).toBe(true);
    expect(progress.current).toBeUndefined();
  });

  it('lets any of the chain messages finish the chain stage', () => {
    for (const msg of ['devnet deployed', 'devnet resumed from its kept state', 'using the chain at RPC_URL'])
      expect(titles(new StartUpProgress().advance({ msg }))).toEqual([chain]);
  });

  it('finishes every earlier stage with a later stage message', () => {
    const progress = new StartUpProgress();
    expect(titles(progress.advance({ msg: 'gateway listening' }))).toEqual([chain, database, services]);
    expect(progress.current?.title).toBe(workers);
    // An earlier stage's message after that finishes nothing again.
    expect(progress.advance({ msg: 'devnet deployed' })).toEqual([]);
    expect(progress.advance({ msg: 'database migrations checked' })).toEqual([]);
    expect(progress.current?.title).toBe(workers);
  });

  it('ignores other lines', () => {
    const progress = new StartUpProgress();
    for (const line of [
      {},
      { msg: 'something else' },
      { msg: 'Devnet deployed' },
      { level: 50, err: 'boom' },
    ])
      expect(progress.advance(line)).toEqual([]);
    expect(progress.current?.title).toBe(chain);
    expect(progress.complete).toBe(false);
  });

  it('runs any list of stages', () => {
    const stages: Stage[] = [
      { title: 'a', finishedBy: (line) => line.msg === 'a' },
      { title: 'b', finishedBy: (line) => line.service === 'b' },
    ];
    const progress = new StartUpProgress(stages);
    expect(titles(progress.advance({ service: 'b', msg: 'up' }))).toEqual(['a', 'b']);
    expect(progress.complete).toBe(true);
    expect(progress.advance({ msg: 'a' })).toEqual([]);
    expect(new StartUpProgress([]).complete).toBe(true);
  });
});

const DEMO_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const DEMO_ADDRESS = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';

function stackFile(overrides: Partial<StackFile> = {}): StackFile {
  return {
    gatewayUrl: 'http://127.0.0.1:8080',
    rpcUrl: 'http://127.0.0.1:8545',
    chainId: 31337,
    contracts: {
      jobRegistry: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
      workerRegistry: '0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512',
    },
    delegate: '0x976EA74026E726554dB657fA54763abd0C3a0aa9',
    facilitator: null,
    models: ['demo-small', 'demo-large'],
    accounts: [],
    demoWallet: { address: DEMO_ADDRESS, privateKey: DEMO_KEY },
    ...overrides,
  };
}

const CLI = '/home/dev/svc/node_modules/.bin/svc';

describe('startUpSummary', () => {
  it('says where the API and the console are, the models, the chain, the logs and the start-up time', () => {
    const summary = startUpSummary(stackFile(), {
      seconds: 12.345,
      logFile: '/state/logs/server.log',
      cli: CLI,
    });
    expect(summary).toContain('started in 12.3 s');
    expect(summary).toContain('http://127.0.0.1:8080/v1');
    expect(summary).toContain('http://127.0.0.1:8080/api');
    expect(summary).toMatch(/^ {2}Console +http:\/\/127\.0\.0\.1:8080\/ /m);
    expect(summary).toContain('demo-small, demo-large');
    expect(summary).toContain('http://127.0.0.1:8545');
    expect(summary).toContain('chain id 31337');
    expect(summary).toContain('0x5FbDB2315678afecb367f032d93F642f64180aa3');
    expect(summary).toMatch(/^ {2}Logs +\/state\/logs\/server\.log$/m);
    expect(summary).toContain('Ctrl-C stops everything.');
  });

  it('shows the demo wallet, its dev key and the three svc commands, svc named by its path', () => {
    const summary = startUpSummary(stackFile(), { seconds: 1, logFile: null, cli: CLI });
    expect(summary).toContain(DEMO_ADDRESS);
    expect(summary).toContain(`export SVC_PRIVATE_KEY=${DEMO_KEY}`);
    expect(summary).toMatch(/never use it on a real chain/);
    const commands = summary
      .split('\n')
      .map((line) => line.trim())
      .filter((line) => /^svc (login|chat|pay) /.test(line))
      .map((line) => line.replace(/\s+#.*$/, ''));
    expect(commands).toEqual([
      'svc login && svc keys create --name demo --save',
      'svc chat "Hello"',
      'svc pay "Hello"',
    ]);
    // By path, not `npx svc`: from another directory npx would fetch an unrelated package named svc.
    expect(summary).toContain(`  alias svc=${CLI}\n`);
    expect(summary.indexOf('alias svc=')).toBeLessThan(summary.indexOf('svc login'));
    expect(summary.indexOf('export SVC_PRIVATE_KEY')).toBeLessThan(summary.indexOf('svc login'));
  });

  it('omits the wallet lines and the commands without a demo wallet, and the logs without a file', () => {
    const summary = startUpSummary(stackFile({ demoWallet: null, models: [] }), {
      seconds: 2,
      logFile: null,
      cli: CLI,
    });
    expect(summary).toContain('http://127.0.0.1:8080/v1');
    expect(summary).toContain('(none yet)');
    expect(summary).not.toContain(DEMO_KEY);
    expect(summary).not.toContain(DEMO_ADDRESS);
    expect(summary).not.toMatch(/Demo wallet|dev key|SVC_PRIVATE_KEY|npx svc|Logs/);
    expect(summary).toContain('Ctrl-C stops everything.');
  });
});

describe('the log file', () => {
  let dir: string;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-launcher-'));
  });

  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  async function run(path: string, text: string): Promise<void> {
    const stream = openLogFile(path);
    stream.end(text);
    await once(stream, 'close');
  }

  it("is created with its directory, owner-only, and keeps the previous run's as server.previous.log", async () => {
    const path = join(dir, 'logs', 'server.log');
    const previous = join(dir, 'logs', 'server.previous.log');
    await run(path, '{"msg":"first run"}\n');
    expect(readFileSync(path, 'utf8')).toBe('{"msg":"first run"}\n');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(existsSync(previous)).toBe(false);

    await run(path, '{"msg":"second run"}\n');
    expect(readFileSync(path, 'utf8')).toBe('{"msg":"second run"}\n');
    expect(readFileSync(previous, 'utf8')).toBe('{"msg":"first run"}\n');

    await run(path, '{"msg":"third run"}\n');
    expect(readFileSync(path, 'utf8')).toBe('{"msg":"third run"}\n');
    expect(readFileSync(previous, 'utf8')).toBe('{"msg":"second run"}\n');
  });
});

describe('log lines', () => {
  it('parses a JSON object line, and nothing else', () => {
    expect(parseLogLine('{"level":30,"service":"gateway","msg":"gateway listening"}')).toEqual({
      level: 30,
      service: 'gateway',
      msg: 'gateway listening',
    });
    for (const text of [
      '',
      'plain text from a child',
      'Compiling...',
      '{broken',
      ' {"msg":"x"}',
      '[1,2]',
      'null',
      '42',
    ])
      expect(parseLogLine(text)).toBeUndefined();
  });

  it('reads the level as a label or a number, info when unknown', () => {
    expect(levelOf({ level: 'trace' })).toBe(10);
    expect(levelOf({ level: 'warn' })).toBe(40);
    expect(levelOf({ level: 'fatal' })).toBe(60);
    expect(levelOf({ level: 50 })).toBe(50);
    expect(levelOf({ level: 35 })).toBe(35);
    expect(levelOf({})).toBe(30);
    expect(levelOf({ level: 'loud' })).toBe(30);
  });

  it('renders a JSON line for a person: level, service and message on one line', () => {
    const pretty = prettyLogLines(false);
    const text = pretty(
      JSON.stringify({
        level: 40,
        time: Date.now(),
        pid: 1,
        hostname: 'h',
        service: 'gateway',
        msg: 'slow',
        ms: 900,
      }),
    );
    expect(text).toContain('WARN');
    expect(text).toContain('gateway: slow');
    expect(text).toContain('900');
    expect(text).not.toContain('hostname');
    expect(text.trimEnd().split('\n')).toHaveLength(1);
    const ESC = String.fromCharCode(0x1b);
    expect(text).not.toContain(`${ESC}[`);
    expect(prettyLogLines(true)(JSON.stringify({ level: 50, time: 0, service: 's', msg: 'm' }))).toContain(
      `${ESC}[`,
    );
  });
});
