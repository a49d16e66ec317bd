import { describe, expect, it } from '@jest/globals';
import { formatAmount, parseAmount } from '../src/amounts.js';
import { CliError, EXIT } from '../src/errors.js';

function usageMessage(text: string, what?: string): string {
  try {
    parseAmount(text, what);
  } catch (error) {
    expect(error).toBeInstanceOf(CliError);
    expect((error as CliError).exitCode).toBe(EXIT.usage);
    return (error as CliError).message;
  }
  throw new Error(`parseAmount accepted "${text}"`);
}

describe('parseAmount', () => {
  it('reads whole wei as the API writes them', () => {
    expect(parseAmount('1000')).toBe(1000n);
    expect(parseAmount('0')).toBe(0n);
    expect(parseAmount('123456789012345678901234567890')).toBe(123456789012345678901234567890n);
  });

  it('reads a decimal with a unit, in any case, around spaces', () => {
    expect(parseAmount('0.01ether')).toBe(10n ** 16n);
    expect(parseAmount('1.5ETH')).toBe(15n * 10n ** 17n);
    expect(parseAmount('2eth')).toBe(2n * 10n ** 18n);
    expect(parseAmount('5gwei')).toBe(5_000_000_000n);
    expect(parseAmount('0.5GWei')).toBe(500_000_000n);
    expect(parseAmount('1000wei')).toBe(1000n);
    expect(parseAmount('  7gwei\n')).toBe(7_000_000_000n);
  });

  it('refuses a sign, a fraction of a wei, and anything that is not an amount', () => {
    for (const text of [
      '-1',
      '+1',
      '1.5',
      '1.5wei',
      '1e18',
      '0x10',
      '1.',
      '.5ether',
      'abc',
      '',
      '5 gwei',
      '1ETHER2',
    ])
      expect(usageMessage(text)).toMatch(/is not an amount: whole wei \(1000\), or with a unit/);
  });

  it('names what was given and what it was for', () => {
    expect(usageMessage('lots', 'cap')).toMatch(/^cap "lots" is not an amount/);
    expect(usageMessage('lots')).toMatch(/^amount "lots"/);
  });

  it('refuses more decimals than the unit has', () => {
    expect(parseAmount('0.000000001gwei')).toBe(1n);
    expect(usageMessage('0.0000000001gwei')).toBe(
      'amount "0.0000000001gwei" has more decimals than gwei allows',
    );
    expect(parseAmount('0.000000000000000001ether')).toBe(1n);
    expect(usageMessage('0.0000000000000000001ether')).toMatch(/more decimals than ether allows/);
  });
});

describe('formatAmount', () => {
  it('shows wei and ether together, from a bigint or a decimal string', () => {
    expect(formatAmount(10n ** 18n)).toBe('1000000000000000000 wei (1.0 ETH)');
    expect(formatAmount('1500')).toBe('1500 wei (0.0000000000000015 ETH)');
    expect(formatAmount(0n)).toBe('0 wei (0.0 ETH)');
    expect(formatAmount(parseAmount('0.01ether'))).toBe('10000000000000000 wei (0.01 ETH)');
  });
});
