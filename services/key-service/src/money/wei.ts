import { AppError } from '@svc/platform';

/** The largest uint256: no on-chain amount, hence no cap or fee, can exceed it. */
export const MAX_UINT256 = 2n ** 256n - 1n;

// ASCII digits only, nothing around them: no whitespace (String.trim would take Unicode spaces too), no sign.
const DECIMAL_DIGITS = /^[0-9]{1,78}$/;

/** Parses a non-negative decimal string of wei (what the wire carries) into a bigint. */
export function parseWei(text: string, field: string): bigint {
  if (!DECIMAL_DIGITS.test(text)) {
    throw new AppError('invalid_request', {
      message: `${field} must be a non-negative whole number of wei as a decimal string.`,
    });
  }
  const value = BigInt(text);
  if (value > MAX_UINT256) {
    throw new AppError('invalid_request', { message: `${field} is larger than a uint256.` });
  }
  return value;
}

/** Reads a numeric(78,0) column that SQL returned as text. */
export function weiFromColumn(text: string): bigint {
  return BigInt(text);
}
