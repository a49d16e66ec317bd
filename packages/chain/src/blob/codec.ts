import { BlobPayloadTooLargeError, MalformedBlobError } from '../errors.js';

/**
 * BlobCodec (docs/protocol.md, Blob format): the payload is framed as a 4-byte big-endian length
 * followed by the bytes, and that stream is packed 31 bytes per 32-byte field element with byte 0 of
 * every element 0x00 (which keeps every element below the BLS12-381 modulus), over 4096 elements.
 * Unused stream bytes are zero, so every payload has exactly one blob and the decoder accepts nothing
 * else.
 */
export const FIELD_ELEMENTS_PER_BLOB = 4096;
export const BYTES_PER_FIELD_ELEMENT = 32;
export const USABLE_BYTES_PER_FIELD_ELEMENT = 31;
export const BLOB_BYTES = FIELD_ELEMENTS_PER_BLOB * BYTES_PER_FIELD_ELEMENT; // 131,072
export const BLOB_CAPACITY_BYTES = FIELD_ELEMENTS_PER_BLOB * USABLE_BYTES_PER_FIELD_ELEMENT; // 126,976
export const BLOB_LENGTH_PREFIX_BYTES = 4;
export const MAX_BLOB_PAYLOAD_BYTES = BLOB_CAPACITY_BYTES - BLOB_LENGTH_PREFIX_BYTES; // 126,972

/** Packs `payload` into a fresh 131,072-byte blob. */
export function encodeBlob(payload: Uint8Array): Uint8Array {
  const length = payload.length;
  if (length > MAX_BLOB_PAYLOAD_BYTES) throw new BlobPayloadTooLargeError(length, MAX_BLOB_PAYLOAD_BYTES);

  const blob = new Uint8Array(BLOB_BYTES);
  // The stream is prefix ‖ payload; stream byte s lands at element s / 31, offset 1 + s % 31.
  // The prefix fits inside element 0 (offsets 1..4), so the payload starts at stream byte 4.
  blob[1] = length >>> 24;
  blob[2] = (length >>> 16) & 0xff;
  blob[3] = (length >>> 8) & 0xff;
  blob[4] = length & 0xff;

  let source = 0;
  let target = 1 + BLOB_LENGTH_PREFIX_BYTES;
  let roomInElement = USABLE_BYTES_PER_FIELD_ELEMENT - BLOB_LENGTH_PREFIX_BYTES;
  while (source < length) {
    const take = Math.min(roomInElement, length - source);
    for (let i = 0; i < take; i++) blob[target + i] = payload[source + i]!;
    source += take;
    // Step over the next element's zero high byte.
    target += take + 1;
    roomInElement = USABLE_BYTES_PER_FIELD_ELEMENT;
  }
  return blob;
}

/**
 * Recovers the payload of a blob made by {@link encodeBlob}. Throws {@link MalformedBlobError} (and
 * nothing else) for any other input: blobs are public and anyone can post one, so a worker must
 * refuse junk rather than crash on it.
 */
export function decodeBlob(blob: Uint8Array): Uint8Array {
  if (!(blob instanceof Uint8Array) || blob.length !== BLOB_BYTES) {
    const size = blob instanceof Uint8Array ? blob.length : typeof blob;
    throw new MalformedBlobError('wrong_size', `a blob is ${BLOB_BYTES} bytes, got ${size}`);
  }
  for (let element = 0; element < BLOB_BYTES; element += BYTES_PER_FIELD_ELEMENT) {
    if (blob[element] !== 0) {
      throw new MalformedBlobError(
        'non_zero_high_byte',
        `field element ${element / BYTES_PER_FIELD_ELEMENT} has a non-zero high byte`,
      );
    }
  }

  const length = ((blob[1]! << 24) | (blob[2]! << 16) | (blob[3]! << 8) | blob[4]!) >>> 0;
  if (length > MAX_BLOB_PAYLOAD_BYTES) {
    throw new MalformedBlobError(
      'length_past_capacity',
      `length prefix ${length} exceeds the ${MAX_BLOB_PAYLOAD_BYTES}-byte capacity`,
    );
  }

  const payload = new Uint8Array(length);
  let copied = 0;
  let source = 1 + BLOB_LENGTH_PREFIX_BYTES; // next unread blob offset
  let roomInElement = USABLE_BYTES_PER_FIELD_ELEMENT - BLOB_LENGTH_PREFIX_BYTES;
  while (copied < length) {
    const take = Math.min(roomInElement, length - copied);
    for (let i = 0; i < take; i++) payload[copied + i] = blob[source + i]!;
    copied += take;
    source += take;
    if (take === roomInElement) source += 1; // step over the next element's high byte
    roomInElement = USABLE_BYTES_PER_FIELD_ELEMENT;
  }

  // Padding must be zero so that a versioned hash on chain names exactly one payload. High bytes
  // inside the range were checked above and are zero, so scanning them again is harmless.
  for (let offset = source; offset < BLOB_BYTES; offset++) {
    if (blob[offset] !== 0) {
      throw new MalformedBlobError('non_zero_padding', `non-zero padding byte at blob offset ${offset}`);
    }
  }
  return payload;
}
