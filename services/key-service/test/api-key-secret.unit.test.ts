import { createHash } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { ApiKeyHasher, generateApiKeySecret, hasApiKeyShape } from '../src/keys/api-key-secret.js';

describe('API key secrets', () => {
  it('are svc_ and 43 base-62 characters, with the prefix being svc_ and seven of them', () => {
    const { fullKey, prefix } = generateApiKeySecret();
    expect(fullKey).toMatch(/^svc_[0-9A-Za-z]{43}$/);
    expect(prefix).toBe(fullKey.slice(0, 11));
    expect(hasApiKeyShape(fullKey)).toBe(true);
  });

  it('use the whole alphabet in every position (no fixed or biased leading characters)', () => {
    const firstCharacters = new Set<string>();
    const keys = new Set<string>();
    for (let index = 0; index < 2000; index += 1) {
      const { fullKey } = generateApiKeySecret();
      keys.add(fullKey);
      firstCharacters.add(fullKey[4]!);
    }
    expect(keys.size).toBe(2000);
    // 62^43 is just above 2^256, so the leading character spans about 61 of the 62 values.
    const secondCharacters = new Set(Array.from(keys, (key) => key[5]));
    expect(firstCharacters.size).toBeGreaterThan(55);
    expect(secondCharacters.size).toBe(62);
  });

  it('hashes with HMAC-SHA-256 under the pepper: another pepper, another hash, and never the plain SHA-256', () => {
    const { fullKey } = generateApiKeySecret();
    const peppered = new ApiKeyHasher('pepper-one').hash(fullKey);
    expect(peppered).toHaveLength(32);
    expect(Buffer.from(new ApiKeyHasher('pepper-one').hash(fullKey)).equals(Buffer.from(peppered))).toBe(
      true,
    );
    expect(Buffer.from(new ApiKeyHasher('pepper-two').hash(fullKey)).equals(Buffer.from(peppered))).toBe(
      false,
    );
    const plain = createHash('sha256').update(fullKey).digest();
    expect(Buffer.from(peppered).equals(plain)).toBe(false);
  });
});
