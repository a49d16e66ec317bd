import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { EnvelopeDecryptionError } from '../errors.js';
import { asBuffer } from './bytes.js';

export const AES_KEY_BYTES = 32;
export const GCM_NONCE_BYTES = 12;
export const GCM_TAG_BYTES = 16;

/** A fresh random GCM nonce, or the injected one (test vectors) after checking its size. */
export function nonceOrRandom(nonce: Uint8Array | undefined): Buffer {
  if (nonce === undefined) return randomBytes(GCM_NONCE_BYTES);
  if (nonce.length !== GCM_NONCE_BYTES) {
    throw new RangeError(`an AES-GCM nonce is ${GCM_NONCE_BYTES} bytes, got ${nonce.length}`);
  }
  return asBuffer(nonce);
}

export function requireAesKey(key: Uint8Array, what: string): void {
  if (key.length !== AES_KEY_BYTES)
    throw new RangeError(`${what} must be ${AES_KEY_BYTES} bytes, got ${key.length}`);
}

/** AES-256-GCM: returns ciphertext ‖ tag (16). */
export function gcmSeal(key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, plaintext: Uint8Array): Buffer {
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: GCM_TAG_BYTES });
  cipher.setAAD(aad);
  const head = cipher.update(plaintext);
  const tail = cipher.final();
  return Buffer.concat([head, tail, cipher.getAuthTag()]);
}

/** Opens ciphertext ‖ tag; any tampering (bytes, nonce, AAD, key) is `authentication_failed`. */
export function gcmOpen(key: Uint8Array, nonce: Uint8Array, aad: Uint8Array, sealed: Uint8Array): Buffer {
  const sealedBuffer = asBuffer(sealed);
  const tagStart = sealedBuffer.length - GCM_TAG_BYTES;
  // authTagLength pins the tag size: without it Node accepts truncated tags.
  const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: GCM_TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(sealedBuffer.subarray(tagStart));
  const head = decipher.update(sealedBuffer.subarray(0, tagStart));
  try {
    return Buffer.concat([head, decipher.final()]);
  } catch (error) {
    throw new EnvelopeDecryptionError('authentication_failed', 'AES-GCM authentication failed', {
      cause: error,
    });
  }
}
