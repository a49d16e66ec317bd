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

  it('hash with SHA-256, or with HMAC under a pepper so the same key hashes differently', () => {
    const { fullKey } = generateApiKeySecret();
    const plain = new ApiKeyHasher().hash(fullKey);
    const peppered = new ApiKeyHasher('pepper').hash(fullKey);
    expect(plain).toHaveLength(32);
    expect(Buffer.from(plain).equals(Buffer.from(peppered))).toBe(false);
    expect(Buffer.from(new ApiKeyHasher('pepper').hash(fullKey)).equals(Buffer.from(peppered))).toBe(true);
  });
});
