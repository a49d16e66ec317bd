import { describe, expect, it } from '@jest/globals';
import { formatEth, parseEthAmount, shorten } from '../src/amounts.js';
import { describeFailure, ServiceError } from '../src/api/api-error.js';
import { readCompletionStream } from '../src/api/completions.js';
import { delegateAcceptsOf } from '../src/api/delegate-accepts.js';
import { isLapsed, sessionOf, timeLeft } from '../src/wallet/sign-in-session.js';
import { chainIdOf } from '../src/wallet/wallet-sign-in.js';

// The console's logic that runs without a page; the pages themselves are walked in a real browser by
// apps/e2e/test/console.test.ts.

describe('amounts a person types', () => {
  it('reads plain ETH decimals exactly, to the wei', () => {
    expect(parseEthAmount('0.01')).toBe(10n ** 16n);
    expect(parseEthAmount(' 1 ')).toBe(10n ** 18n);
    expect(parseEthAmount('.5')).toBe(5n * 10n ** 17n);
    expect(parseEthAmount('0.000000000000000001')).toBe(1n);
    expect(parseEthAmount('0')).toBe(0n);
  });

  it('refuses anything else', () => {
    for (const text of ['', '-1', '1e18', '0x10', '1,5', '0.0000000000000000001', '1.', 'one', '１'])
      expect(parseEthAmount(text)).toBeUndefined();
  });

  it('shows wei as ETH and shortens hex for cells', () => {
    expect(formatEth('50000000000000000')).toBe('0.05 ETH');
    expect(formatEth(0n)).toBe('0.0 ETH');
    expect(shorten('0x1234567890abcdef1234567890abcdef12345678')).toBe('0x1234…5678');
    expect(shorten('svc_abc')).toBe('svc_abc');
  });
});

describe('errors as the console shows them', () => {
  it('gives the remedy docs/api.md gives the code', () => {
    expect(new ServiceError(404, 'api_key_not_found', 'No such key.').remedy).toBe(
      'Use an id from GET /api/api-keys.',
    );
    expect(new ServiceError(402, 'delegate_not_authorized', 'x').remedy).toBe(
      'Send the transaction in error.accepts.',
    );
    expect(new ServiceError(400, null, 'messages is required').remedy).toBe('Fix the request.');
    expect(new ServiceError(503, 'some_new_code', 'x').remedy).toBeUndefined();
  });

  it('names the wait a 429 asked for', () => {
    expect(new ServiceError(429, 'rate_limit_exceeded', 'x', { retry_after: 12 }).remedy).toBe(
      'Wait 12 seconds (retry-after).',
    );
  });

  it("keeps a wallet's refusal in its own words", () => {
    expect(describeFailure({ code: 4001, message: 'User rejected the request.' })).toEqual({
      code: 'user_rejected',
      message: 'The wallet declined the request.',
    });
    expect(describeFailure(new Error('boom'))).toEqual({ code: null, message: 'boom' });
  });
});

describe("a delegate-path 402's accepts entry", () => {
  const entry = {
    scheme: 'delegate',
    chain_id: 31337,
    payer: '0x0000000000000000000000000000000000000001',
    delegate: '0x0000000000000000000000000000000000000002',
    instruction: { minimum_value_wei: '1234', function: 'depositAndAuthorize(address)' },
    transaction: {
      to: '0x5fbdb2315678afecb367f032d93f642f64180aa3',
      data: '0xabcdef',
      value: '1234',
      chainId: 31337,
    },
  };

  it('is found among the entries by scheme, its address checksummed', () => {
    expect(delegateAcceptsOf({ accepts: [{ scheme: 'prepaid-debit' }, entry] })).toEqual({
      chainId: 31337,
      payer: '0x0000000000000000000000000000000000000001',
      transaction: { to: '0x5FbDB2315678afecb367f032d93F642f64180aa3', data: '0xabcdef' },
      minimumWei: 1234n,
    });
  });

  it('is undefined when missing or malformed', () => {
    expect(delegateAcceptsOf({})).toBeUndefined();
    expect(delegateAcceptsOf({ accepts: [{ scheme: 'prepaid-debit' }] })).toBeUndefined();
    expect(
      delegateAcceptsOf({ accepts: [{ ...entry, instruction: { minimum_value_wei: '-1' } }] }),
    ).toBeUndefined();
    expect(
      delegateAcceptsOf({ accepts: [{ ...entry, transaction: { ...entry.transaction, to: '0x12' } }] }),
    ).toBeUndefined();
  });
});

describe('the sign-in the console holds', () => {
  const session = sessionOf(
    {
      token: 'eyJ',
      address: '0x0000000000000000000000000000000000000001',
      expiresAt: '2026-11-24T10:00:00.000Z',
    },
    'io.metamask',
  );
  const at = (iso: string) => Date.parse(iso);

  it("counts down the token's own lifetime on this machine's clock, whatever the server's clock says", () => {
    const claims = Buffer.from(JSON.stringify({ sub: 'x', iat: 1_000, exp: 4_600 })).toString('base64url');
    const skewed = sessionOf(
      { token: `eyJhbGciOiJFUzI1NiJ9.${claims}.sig`, address: '0x1', expiresAt: '2026-11-24T10:00:00.000Z' },
      'io.metamask',
      at('2026-11-24T12:00:00Z'),
    );
    expect(skewed.expiresAt).toBe(at('2026-11-24T13:00:00Z'));
    expect(isLapsed(skewed, at('2026-11-24T12:59:59Z'))).toBe(false);
  });

  it('lapses at its expiry, not before', () => {
    expect(isLapsed(session, at('2026-11-24T09:59:59.999Z'))).toBe(false);
    expect(isLapsed(session, at('2026-11-24T10:00:00.000Z'))).toBe(true);
  });

  it('says how long it has left', () => {
    expect(timeLeft(session, at('2026-11-24T09:00:00Z'))).toBe('in 60 min');
    expect(timeLeft(session, at('2026-11-24T09:58:30Z'))).toBe('in 90 s');
    expect(timeLeft(session, at('2026-11-24T11:00:00Z'))).toBe('in 0 s');
  });

  it("reads the chain from the challenge's EIP-4361 message", () => {
    expect(
      chainIdOf('example.com wants you to sign in\n\nURI: http://x\nVersion: 1\nChain ID: 31337\nNonce: 1'),
    ).toBe(31337);
    expect(() => chainIdOf('no chain here')).toThrow('names no chain');
  });
});

describe("a completion's event stream", () => {
  /** A body delivering `text` in the given pieces (split anywhere, as the network splits it). */
  const bodyOf = (...pieces: string[]) =>
    new ReadableStream<Uint8Array>({
      start(controller) {
        for (const piece of pieces) controller.enqueue(new TextEncoder().encode(piece));
        controller.close();
      },
    });
  const chunk = (content: string, extra: object = {}) =>
    `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta: { content } }], ...extra })}\n\n`;
  const service = { job_id: '7', session_id: '2', tx_hash: '0xab', worker: '0xcd' };

  it('gives each piece as it comes and the last chunk’s service object, across split reads', async () => {
    const pieces: string[] = [];
    const whole = chunk('Hel') + chunk('lo') + chunk('', { service }) + 'data: [DONE]\n\n';
    const result = await readCompletionStream(
      bodyOf(whole.slice(0, 17), whole.slice(17, 60), whole.slice(60)),
      (text) => pieces.push(text),
    );
    expect(pieces).toEqual(['Hel', 'lo']);
    expect(result).toEqual(service);
  });

  it('rejects with the code of an error event after the first chunk', async () => {
    const failure = readCompletionStream(
      bodyOf(
        chunk('Hel'),
        'data: {"error":{"message":"restarted","type":"server_error","code":"stream_diverged"}}\n\n',
      ),
      () => undefined,
    );
    await expect(failure).rejects.toMatchObject({ code: 'stream_diverged', message: 'restarted' });
  });

  it('rejects a stream cut before [DONE], and an event that is not JSON', async () => {
    await expect(readCompletionStream(bodyOf(chunk('Hel')), () => undefined)).rejects.toThrow(
      'ended before the answer was complete',
    );
    await expect(readCompletionStream(bodyOf('data: {not json\n\n'), () => undefined)).rejects.toThrow(
      'not JSON',
    );
  });
});
