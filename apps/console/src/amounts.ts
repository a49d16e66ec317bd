import { formatEther, parseEther } from 'ethers';

/** Wei (a decimal string or bigint) as ETH for people: "0.25 ETH". */
export function formatEth(wei: string | bigint): string {
  return `${ethDecimal(wei)} ETH`;
}

/** Wei as the decimal ETH a form field holds: "0.25". */
export function ethDecimal(wei: string | bigint): string {
  return formatEther(BigInt(wei));
}

/**
 * An amount a person typed in ETH ("0.01", "1"), as wei. Undefined for anything that is not a plain
 * non-negative decimal with at most 18 places; the form says what is wrong.
 */
export function parseEthAmount(text: string): bigint | undefined {
  const trimmed = text.trim();
  if (!/^\d+(\.\d{1,18})?$|^\.\d{1,18}$/.test(trimmed)) return undefined;
  try {
    return parseEther(trimmed.startsWith('.') ? `0${trimmed}` : trimmed);
  } catch {
    return undefined;
  }
}

/** "0x1234…cdef": an address or hash short enough for a table cell, in full in its title. */
export function shorten(hex: string): string {
  return hex.length > 14 ? `${hex.slice(0, 6)}…${hex.slice(-4)}` : hex;
}
