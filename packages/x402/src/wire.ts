// The x402 headers on the wire: base64 of JSON. Their shapes (PAYMENT-REQUIRED, PAYMENT-SIGNATURE,
// PAYMENT-RESPONSE) are part of the public interface and live in `@svc/api`; this module encodes and decodes
// them.

/** base64 of the JSON of `value`, as every x402 header carries it. */
export function encodeHeader(value: unknown): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64');
}

/**
 * The JSON inside an x402 header, or undefined when the header is not base64 (standard or URL-safe) of
 * JSON. Says nothing about the JSON's shape.
 */
export function decodeHeader(header: string): unknown {
  const trimmed = header.trim();
  if (trimmed.length === 0 || !/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) return undefined;
  try {
    return JSON.parse(Buffer.from(trimmed, 'base64').toString('utf8')) as unknown;
  } catch {
    return undefined;
  }
}

/** The CAIP-2 name of an EVM chain. */
export function networkOf(chainId: bigint | number): string {
  return `eip155:${chainId}`;
}
