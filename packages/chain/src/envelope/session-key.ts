import { createECDH, createPublicKey, type ECDH } from 'node:crypto';
import { InvalidPublicKeyError } from '../errors.js';
import { asBuffer } from './bytes.js';

export const P256_CURVE = 'prime256v1';
export const P256_PUBLIC_KEY_BYTES = 65;
export const P256_PRIVATE_KEY_BYTES = 32;
const UNCOMPRESSED_POINT_PREFIX = 0x04;

/**
 * Checks that `publicKey` is a 65-byte uncompressed P-256 point on the curve and returns it as a
 * Buffer. The identity has no uncompressed encoding and (0, 0) is off the curve, so the on-curve
 * check also rules out the identity.
 */
export function parseP256PublicKey(publicKey: Uint8Array): Buffer {
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== P256_PUBLIC_KEY_BYTES) {
    const size = publicKey instanceof Uint8Array ? `${publicKey.length} bytes` : typeof publicKey;
    throw new InvalidPublicKeyError(
      'wrong_length',
      `a P-256 public key is ${P256_PUBLIC_KEY_BYTES} bytes uncompressed, got ${size}`,
    );
  }
  if (publicKey[0] !== UNCOMPRESSED_POINT_PREFIX) {
    throw new InvalidPublicKeyError(
      'wrong_prefix',
      `a P-256 public key starts with 0x04, got 0x${hexByte(publicKey[0]!)}`,
    );
  }
  const bytes = asBuffer(publicKey);
  try {
    // OpenSSL checks the point lies on the curve when it imports a JWK.
    createPublicKey({
      key: {
        kty: 'EC',
        crv: 'P-256',
        x: bytes.subarray(1, 33).toString('base64url'),
        y: bytes.subarray(33, 65).toString('base64url'),
      },
      format: 'jwk',
    });
  } catch (error) {
    throw new InvalidPublicKeyError('not_on_curve', 'the public key is not a point on P-256', {
      cause: error,
    });
  }
  return bytes;
}

function hexByte(byte: number): string {
  return byte.toString(16).padStart(2, '0');
}

/**
 * A worker's per-session P-256 key pair. The public key goes on chain in `claimSession`; the private
 * key decrypts that session's prompts and should be dropped when the session closes.
 */
export class SessionKeyPair {
  readonly #ecdh: ECDH;
  /** 65-byte uncompressed public key (0x04 ‖ x ‖ y). */
  readonly publicKey: Uint8Array;

  private constructor(ecdh: ECDH) {
    this.#ecdh = ecdh;
    this.publicKey = new Uint8Array(ecdh.getPublicKey(null, 'uncompressed'));
  }

  static generate(): SessionKeyPair {
    const ecdh = createECDH(P256_CURVE);
    ecdh.generateKeys();
    return new SessionKeyPair(ecdh);
  }

  /** Restores a pair from its 32-byte private scalar (a worker restart, or test vectors). */
  static fromPrivateKey(privateKey: Uint8Array): SessionKeyPair {
    if (privateKey.length !== P256_PRIVATE_KEY_BYTES) {
      throw new RangeError(
        `a P-256 private key is ${P256_PRIVATE_KEY_BYTES} bytes, got ${privateKey.length}`,
      );
    }
    const ecdh = createECDH(P256_CURVE);
    try {
      ecdh.setPrivateKey(privateKey);
    } catch (error) {
      throw new RangeError('the private key is not a valid P-256 scalar', { cause: error });
    }
    return new SessionKeyPair(ecdh);
  }

  /** The 32-byte private scalar, for the worker's own durable storage only. */
  exportPrivateKey(): Uint8Array {
    // Node drops leading zero bytes of the scalar; the stored form is always 32 bytes.
    const scalar = this.#ecdh.getPrivateKey();
    const padded = new Uint8Array(P256_PRIVATE_KEY_BYTES);
    padded.set(scalar, P256_PRIVATE_KEY_BYTES - scalar.length);
    return padded;
  }

  /** Raw ECDH shared secret (x coordinate) with a public key already checked by {@link parseP256PublicKey}. */
  sharedSecretWith(peerPublicKey: Uint8Array): Buffer {
    return this.#ecdh.computeSecret(peerPublicKey);
  }
}
