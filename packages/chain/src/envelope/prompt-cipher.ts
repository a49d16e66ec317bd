import { hkdfSync } from 'node:crypto';
import { EnvelopeDecryptionError } from '../errors.js';
import { MAX_BLOB_PAYLOAD_BYTES } from '../blob/codec.js';
import { AES_KEY_BYTES, GCM_NONCE_BYTES, GCM_TAG_BYTES, gcmOpen, gcmSeal, nonceOrRandom } from './aes-gcm.js';
import { addressBytes, asBuffer, uint256be } from './bytes.js';
import { P256_PUBLIC_KEY_BYTES, SessionKeyPair, parseP256PublicKey } from './session-key.js';

/**
 * Prompt envelope (docs/protocol.md, Encryption), ECIES over P-256:
 *   wire = 0x01 ‖ ephemeral public key (65) ‖ nonce (12) ‖ AES-256-GCM ciphertext ‖ tag (16)
 *   key  = HKDF-SHA256(ikm = ECDH x coordinate, salt = ephemeral pub ‖ session pub, info = "svc/prompt/v1", 32)
 *   AAD  = "svc/prompt/v1" ‖ uint256be(chainId) ‖ JobRegistry address (20) ‖ uint256be(sessionId)
 * The AAD binds a prompt to one session of one registry on one chain, so a blob copied elsewhere
 * does not decrypt.
 */
export const PROMPT_WIRE_VERSION = 0x01;
export const PROMPT_LABEL = 'svc/prompt/v1';
const PROMPT_LABEL_BYTES = Buffer.from(PROMPT_LABEL, 'utf8');

const EPHEMERAL_KEY_OFFSET = 1;
const NONCE_OFFSET = EPHEMERAL_KEY_OFFSET + P256_PUBLIC_KEY_BYTES;
const CIPHERTEXT_OFFSET = NONCE_OFFSET + GCM_NONCE_BYTES;

/** Bytes the envelope adds around the plaintext: version, ephemeral key, nonce, tag (94). */
export const PROMPT_ENVELOPE_OVERHEAD_BYTES = CIPHERTEXT_OFFSET + GCM_TAG_BYTES;

/** The largest prompt plaintext whose wire still fits one blob (126,972 − 94 = 126,878 bytes). */
export const MAX_PROMPT_PLAINTEXT_BYTES = MAX_BLOB_PAYLOAD_BYTES - PROMPT_ENVELOPE_OVERHEAD_BYTES;

/** Whether a prompt plaintext (or its byte length) encrypts to a wire that fits one blob. */
export function promptFitsOneBlob(plaintext: Uint8Array | number): boolean {
  const size = typeof plaintext === 'number' ? plaintext : plaintext.length;
  return size <= MAX_PROMPT_PLAINTEXT_BYTES;
}

/** Where a prompt may be opened: one session of one JobRegistry on one chain. */
export interface PromptBinding {
  readonly chainId: bigint;
  readonly jobRegistry: string;
  readonly sessionId: bigint;
}

export function promptAad(binding: PromptBinding): Buffer {
  return Buffer.concat([
    PROMPT_LABEL_BYTES,
    uint256be(binding.chainId, 'chainId'),
    addressBytes(binding.jobRegistry),
    uint256be(binding.sessionId, 'sessionId'),
  ]);
}

export function derivePromptKey(
  sharedSecret: Uint8Array,
  ephemeralPublicKey: Uint8Array,
  sessionPublicKey: Uint8Array,
): Buffer {
  const salt = Buffer.concat([ephemeralPublicKey, sessionPublicKey]);
  return Buffer.from(hkdfSync('sha256', sharedSecret, salt, PROMPT_LABEL_BYTES, AES_KEY_BYTES));
}

/** Fixed randomness for reproducible test vectors; never set in production. */
export interface PromptEncryptionRandomness {
  readonly ephemeralPrivateKey?: Uint8Array;
  readonly nonce?: Uint8Array;
}

/**
 * Encrypts prompt plaintext to a session's public key. Throws {@link InvalidPublicKeyError} for a key
 * that is not a valid P-256 point. The blob capacity is the caller's rule: see {@link promptFitsOneBlob}.
 */
export function encryptPrompt(
  plaintext: Uint8Array,
  sessionPublicKey: Uint8Array,
  binding: PromptBinding,
  randomness: PromptEncryptionRandomness = {},
): Uint8Array {
  const sessionKey = parseP256PublicKey(sessionPublicKey);
  const aad = promptAad(binding);
  const ephemeral =
    randomness.ephemeralPrivateKey === undefined
      ? SessionKeyPair.generate()
      : SessionKeyPair.fromPrivateKey(randomness.ephemeralPrivateKey);
  const nonce = nonceOrRandom(randomness.nonce);
  const key = derivePromptKey(ephemeral.sharedSecretWith(sessionKey), ephemeral.publicKey, sessionKey);
  const sealed = gcmSeal(key, nonce, aad, plaintext);

  const wire = new Uint8Array(CIPHERTEXT_OFFSET + sealed.length);
  wire[0] = PROMPT_WIRE_VERSION;
  wire.set(ephemeral.publicKey, EPHEMERAL_KEY_OFFSET);
  wire.set(nonce, NONCE_OFFSET);
  wire.set(sealed, CIPHERTEXT_OFFSET);
  return wire;
}

/**
 * Opens a prompt wire with the session's key pair. Every failure is an {@link EnvelopeDecryptionError}:
 * the wire comes from a public blob and may be anything.
 */
export function decryptPrompt(
  wire: Uint8Array,
  sessionKeyPair: SessionKeyPair,
  binding: PromptBinding,
): Uint8Array {
  if (wire.length < PROMPT_ENVELOPE_OVERHEAD_BYTES) {
    throw new EnvelopeDecryptionError(
      'truncated',
      `a prompt wire is at least ${PROMPT_ENVELOPE_OVERHEAD_BYTES} bytes, got ${wire.length}`,
    );
  }
  if (wire[0] !== PROMPT_WIRE_VERSION) {
    throw new EnvelopeDecryptionError('unsupported_version', `unsupported prompt wire version ${wire[0]}`);
  }
  const bytes = asBuffer(wire);
  const ephemeralPublicKey = bytes.subarray(EPHEMERAL_KEY_OFFSET, NONCE_OFFSET);
  let sharedSecret: Buffer;
  try {
    sharedSecret = sessionKeyPair.sharedSecretWith(parseP256PublicKey(ephemeralPublicKey));
  } catch (error) {
    throw new EnvelopeDecryptionError(
      'invalid_ephemeral_key',
      'the ephemeral key is not a valid P-256 point',
      {
        cause: error,
      },
    );
  }
  const key = derivePromptKey(sharedSecret, ephemeralPublicKey, sessionKeyPair.publicKey);
  const nonce = bytes.subarray(NONCE_OFFSET, CIPHERTEXT_OFFSET);
  return new Uint8Array(gcmOpen(key, nonce, promptAad(binding), bytes.subarray(CIPHERTEXT_OFFSET)));
}
