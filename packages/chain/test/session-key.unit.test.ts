import { createECDH } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import {
  InvalidPublicKeyError,
  P256_PRIVATE_KEY_BYTES,
  P256_PUBLIC_KEY_BYTES,
  SessionKeyPair,
  parseP256PublicKey,
} from '../src/index.js';

function rejection(key: Uint8Array): InvalidPublicKeyError {
  try {
    parseP256PublicKey(key);
  } catch (error) {
    if (error instanceof InvalidPublicKeyError) return error;
    throw error;
  }
  throw new Error('the key was accepted');
}

describe('SessionKeyPair', () => {
  it('generates a 65-byte uncompressed public key that parses', () => {
    const pair = SessionKeyPair.generate();
    expect(pair.publicKey.length).toBe(P256_PUBLIC_KEY_BYTES);
    expect(pair.publicKey[0]).toBe(0x04);
    expect(parseP256PublicKey(pair.publicKey)).toEqual(Buffer.from(pair.publicKey));
  });

  it('generates a fresh pair every time', () => {
    expect(SessionKeyPair.generate().publicKey).not.toEqual(SessionKeyPair.generate().publicKey);
  });

  it('restores the same pair from its exported private key, padded to 32 bytes', () => {
    const pair = SessionKeyPair.generate();
    const restored = SessionKeyPair.fromPrivateKey(pair.exportPrivateKey());
    expect(restored.publicKey).toEqual(pair.publicKey);

    const smallScalar = new Uint8Array(P256_PRIVATE_KEY_BYTES);
    smallScalar[31] = 7;
    const exported = SessionKeyPair.fromPrivateKey(smallScalar).exportPrivateKey();
    expect(exported).toEqual(smallScalar);
  });

  it('agrees on the ECDH secret with the other side', () => {
    const a = SessionKeyPair.generate();
    const b = SessionKeyPair.generate();
    expect(a.sharedSecretWith(b.publicKey)).toEqual(b.sharedSecretWith(a.publicKey));
  });

  it('refuses private keys that are not 32-byte scalars in range', () => {
    expect(() => SessionKeyPair.fromPrivateKey(new Uint8Array(31).fill(1))).toThrow(RangeError);
    expect(() => SessionKeyPair.fromPrivateKey(new Uint8Array(32))).toThrow(RangeError);
    const order = Buffer.from('ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551', 'hex');
    expect(() => SessionKeyPair.fromPrivateKey(order)).toThrow(RangeError);
  });
});

describe('parseP256PublicKey', () => {
  const valid = SessionKeyPair.generate().publicKey;

  it('rejects the wrong length, compressed keys included', () => {
    expect(rejection(valid.subarray(1)).reason).toBe('wrong_length');
    expect(rejection(new Uint8Array(0)).reason).toBe('wrong_length');
    expect(rejection(new Uint8Array([...valid, 0])).reason).toBe('wrong_length');
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    expect(rejection(ecdh.getPublicKey(null, 'compressed')).reason).toBe('wrong_length');
  });

  it('rejects a prefix other than 0x04', () => {
    for (const prefix of [0x00, 0x02, 0x03, 0x06, 0x07]) {
      const key = new Uint8Array(valid);
      key[0] = prefix;
      expect(rejection(key).reason).toBe('wrong_prefix');
    }
  });

  it('rejects points off the curve', () => {
    const flippedY = new Uint8Array(valid);
    flippedY[64]! ^= 0x01;
    expect(rejection(flippedY).reason).toBe('not_on_curve');

    const flippedX = new Uint8Array(valid);
    flippedX[1]! ^= 0x80;
    expect(rejection(flippedX).reason).toBe('not_on_curve');

    const origin = new Uint8Array(P256_PUBLIC_KEY_BYTES);
    origin[0] = 0x04;
    expect(rejection(origin).reason).toBe('not_on_curve');

    // Coordinates at or above the field prime are not field elements.
    const beyondField = new Uint8Array(P256_PUBLIC_KEY_BYTES).fill(0xff);
    beyondField[0] = 0x04;
    expect(rejection(beyondField).reason).toBe('not_on_curve');
  });
});
