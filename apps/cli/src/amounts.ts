import { formatEther, parseUnits } from 'ethers';
import { usageError } from './errors.js';

const UNITS: Readonly<Record<string, number>> = { wei: 0, gwei: 9, ether: 18, eth: 18 };

/**
 * An amount of wei from the command line: whole wei as the API writes them (`"1000"`), or a decimal
 * with a unit (`0.01ether`, `5gwei`, `1000wei`). Refuses a sign, a fraction of a wei and anything else.
 */
export function parseAmount(text: string, what = 'amount'): bigint {
  const match = /^([0-9]+(?:\.[0-9]+)?)(wei|gwei|ether|eth)?$/i.exec(text.trim());
  const unit = match?.[2]?.toLowerCase() ?? 'wei';
  if (!match || (unit === 'wei' && match[1]!.includes('.')))
    throw usageError(
      `${what} "${text}" is not an amount: whole wei (1000), or with a unit (0.01ether, 5gwei)`,
    );
  try {
    return parseUnits(match[1]!, UNITS[unit]);
  } catch {
    throw usageError(`${what} "${text}" has more decimals than ${unit} allows`);
  }
}

/** `<wei> wei (<ether> ETH)`, the way every command shows money. */
export function formatAmount(wei: bigint | string): string {
  const value = BigInt(wei);
  return `${value} wei (${formatEther(value)} ETH)`;
}
