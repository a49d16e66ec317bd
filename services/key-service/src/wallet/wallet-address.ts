import { AppError } from '@svc/platform';
import { getAddress } from 'ethers';

/**
 * A wallet address in its two spellings: `checksummed` (EIP-55) for everything shown or signed, `lowercase`
 * for storage and comparison.
 */
export interface WalletAddress {
  readonly checksummed: string;
  readonly lowercase: string;
}

const ADDRESS_SHAPE = /^0x[0-9a-fA-F]{40}$/;

/**
 * Accepts "0x" and 40 hex digits in lowercase, uppercase or valid EIP-55 mixed case; a mixed-case address
 * with a wrong checksum is a typo, refused rather than silently corrected.
 */
export function parseWalletAddress(raw: string | undefined, field = 'address'): WalletAddress {
  const text = (raw ?? '').trim();
  if (!ADDRESS_SHAPE.test(text)) {
    throw new AppError('invalid_request', { message: `${field} must be "0x" followed by 40 hex digits.` });
  }
  let checksummed: string;
  try {
    checksummed = getAddress(text);
  } catch {
    throw new AppError('invalid_request', { message: `${field} has an invalid EIP-55 checksum.` });
  }
  return { checksummed, lowercase: checksummed.toLowerCase() };
}

/** The address of a row (stored lowercase) in both spellings. */
export function walletFromStored(lowercase: string): WalletAddress {
  const checksummed = getAddress(lowercase);
  return { checksummed, lowercase: checksummed.toLowerCase() };
}
