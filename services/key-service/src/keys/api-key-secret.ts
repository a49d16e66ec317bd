import { createHmac, randomBytes } from 'node:crypto';

export const API_KEY_PREFIX = 'svc_';
const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** 62^43 > 2^256: 43 base-62 characters hold 32 random bytes, so a key carries a full 256 bits. */
const BODY_LENGTH = 43;
const SECRET_BYTES = 32;
/** Characters after `svc_` shown in the prefix. */
const PREFIX_BODY_LENGTH = 7;
const KEY_SHAPE = new RegExp(`^${API_KEY_PREFIX}[0-9A-Za-z]{${BODY_LENGTH}}$`);

export interface ApiKeySecret {
  /** The whole key, shown to its owner once. */
  readonly fullKey: string;
  /** `svc_` and the next seven characters: names the key without revealing it. */
  readonly prefix: string;
}

/** A new key: `svc_` and 256 random bits in base 62 (no `-` or `_`, so a double-click selects it whole). */
export function generateApiKeySecret(): ApiKeySecret {
  let value = BigInt(`0x${randomBytes(SECRET_BYTES).toString('hex')}`);
  let body = '';
  for (let index = 0; index < BODY_LENGTH; index += 1) {
    body = BASE62[Number(value % 62n)] + body;
    value /= 62n;
  }
  const fullKey = API_KEY_PREFIX + body;
  return { fullKey, prefix: fullKey.slice(0, API_KEY_PREFIX.length + PREFIX_BODY_LENGTH) };
}

/** Whether a presented credential could be one of our keys at all (checked before any lookup). */
export function hasApiKeyShape(presented: string): boolean {
  return KEY_SHAPE.test(presented);
}

/**
 * The stored form of a key: HMAC-SHA-256 under the configured pepper, so a leaked table alone cannot even
 * confirm a guessed key. A key has 256 random bits, so no slow hash is needed.
 */
export class ApiKeyHasher {
  constructor(private readonly pepper: string) {}

  hash(fullKey: string): Uint8Array<ArrayBuffer> {
    return Uint8Array.from(createHmac('sha256', this.pepper).update(fullKey, 'utf8').digest());
  }
}
