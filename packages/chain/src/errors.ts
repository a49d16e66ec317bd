/**
 * Typed failures of this package. Each carries a stable `reason` so callers branch on data, never on
 * message text; the edge of each service maps them to its own wire codes.
 */
export abstract class ChainCodecError<Reason extends string = string> extends Error {
  readonly reason: Reason;

  protected constructor(reason: Reason, message: string, options?: ErrorOptions) {
    super(message, options);
    this.reason = reason;
    this.name = new.target.name;
  }
}

/**
 * Payloads larger than one blob can carry: `payloadBytes` is their total, `maxPayloadBytes` the most
 * that `payloadCount` payloads fit in one blob (each frame takes a 4-byte prefix of the capacity).
 */
export class BlobPayloadTooLargeError extends ChainCodecError<'payload_too_large'> {
  constructor(
    readonly payloadBytes: number,
    readonly maxPayloadBytes: number,
    readonly payloadCount = 1,
  ) {
    super(
      'payload_too_large',
      payloadCount === 1
        ? `blob payload of ${payloadBytes} bytes exceeds the ${maxPayloadBytes}-byte capacity`
        : `${payloadCount} blob payloads of ${payloadBytes} bytes together exceed the ${maxPayloadBytes} ` +
            `bytes that ${payloadCount} payloads can carry`,
    );
  }
}

export type MalformedBlobReason =
  | 'wrong_size'
  | 'non_zero_high_byte'
  | 'length_past_capacity'
  | 'non_zero_padding'
  | 'empty'
  | 'no_such_payload'
  | 'not_canonical';

/**
 * Bytes that are not a blob produced by the codec (or a field element c-kzg refuses), or a valid blob
 * without the payload asked for (`no_such_payload`).
 */
export class MalformedBlobError extends ChainCodecError<MalformedBlobReason> {
  constructor(reason: MalformedBlobReason, message: string, options?: ErrorOptions) {
    super(reason, message, options);
  }
}

export type InvalidPublicKeyReason = 'wrong_length' | 'wrong_prefix' | 'not_on_curve';

/** A session public key that must not be encrypted to. */
export class InvalidPublicKeyError extends ChainCodecError<InvalidPublicKeyReason> {
  constructor(reason: InvalidPublicKeyReason, message: string, options?: ErrorOptions) {
    super(reason, message, options);
  }
}

export type EnvelopeDecryptionReason =
  'truncated' | 'unsupported_version' | 'invalid_ephemeral_key' | 'authentication_failed' | 'invalid_utf8';

/**
 * A prompt or answer frame that could not be opened. `authentication_failed` covers every tampered
 * byte and every mismatching context field (ids, registry, kind, attempt, seq): GCM cannot tell them apart.
 */
export class EnvelopeDecryptionError extends ChainCodecError<EnvelopeDecryptionReason> {
  constructor(reason: EnvelopeDecryptionReason, message: string, options?: ErrorOptions) {
    super(reason, message, options);
  }
}

/** A decrypted prompt whose JSON does not follow the v1 plaintext shape. */
export class InvalidPromptError extends ChainCodecError<'invalid_prompt'> {
  constructor(message: string, options?: ErrorOptions) {
    super('invalid_prompt', message, options);
  }
}

export type InvalidAnswerSignatureReason = 'malformed' | 'non_canonical';

/** A worker signature that is not a 65-byte, low-s, v ∈ {27, 28} secp256k1 signature. */
export class InvalidAnswerSignatureError extends ChainCodecError<InvalidAnswerSignatureReason> {
  constructor(reason: InvalidAnswerSignatureReason, message: string, options?: ErrorOptions) {
    super(reason, message, options);
  }
}
