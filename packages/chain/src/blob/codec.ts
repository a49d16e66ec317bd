import { BlobPayloadTooLargeError, MalformedBlobError } from '../errors.js';

/**
 * BlobCodec (docs/protocol.md, Blob format): one blob carries one or more payloads. Each is framed as
 * a 4-byte big-endian length (at least 1) followed by its bytes; the frames follow one another, and a
 * zero length (or fewer than 4 stream bytes left) ends the list. That stream is packed 31 bytes per 32-byte
 * field element with byte 0 of every element 0x00 (which keeps every element below the BLS12-381
 * modulus), over 4096 elements. Unused stream bytes are zero, so every list of payloads has exactly one
 * blob and the decoder accepts nothing else. A blob with one frame is the single-payload encoding.
 */
export const FIELD_ELEMENTS_PER_BLOB = 4096;
export const BYTES_PER_FIELD_ELEMENT = 32;
export const USABLE_BYTES_PER_FIELD_ELEMENT = 31;
export const BLOB_BYTES = FIELD_ELEMENTS_PER_BLOB * BYTES_PER_FIELD_ELEMENT; // 131,072
export const BLOB_CAPACITY_BYTES = FIELD_ELEMENTS_PER_BLOB * USABLE_BYTES_PER_FIELD_ELEMENT; // 126,976
/** The length prefix in front of every payload. */
export const BLOB_FRAME_OVERHEAD_BYTES = 4;
/** The largest payload, alone in its blob. */
export const MAX_BLOB_PAYLOAD_BYTES = BLOB_CAPACITY_BYTES - BLOB_FRAME_OVERHEAD_BYTES; // 126,972

/**
 * Stream bytes `payload` takes in a blob, prefix included. Payloads share a blob while these add up to
 * at most {@link BLOB_CAPACITY_BYTES}.
 */
export function framedLength(payload: Uint8Array): number {
  return BLOB_FRAME_OVERHEAD_BYTES + payload.length;
}

// Stream byte s lands at element s / 31, offset 1 + s % 31: blob offset s + floor(s / 31) + 1.
const blobOffsetOf = (stream: number): number =>
  stream + Math.floor(stream / USABLE_BYTES_PER_FIELD_ELEMENT) + 1;

/** Copies `bytes` into the stream from stream byte `stream` on, element by element. */
function writeStream(blob: Uint8Array, stream: number, bytes: Uint8Array): void {
  let source = 0;
  while (source < bytes.length) {
    const take = Math.min(
      USABLE_BYTES_PER_FIELD_ELEMENT - (stream % USABLE_BYTES_PER_FIELD_ELEMENT),
      bytes.length - source,
    );
    blob.set(bytes.subarray(source, source + take), blobOffsetOf(stream));
    source += take;
    stream += take;
  }
}

/** Fills `into` from the stream, from stream byte `stream` on. */
function readStream(blob: Uint8Array, stream: number, into: Uint8Array): void {
  let copied = 0;
  while (copied < into.length) {
    const take = Math.min(
      USABLE_BYTES_PER_FIELD_ELEMENT - (stream % USABLE_BYTES_PER_FIELD_ELEMENT),
      into.length - copied,
    );
    const source = blobOffsetOf(stream);
    into.set(blob.subarray(source, source + take), copied);
    copied += take;
    stream += take;
  }
}

function readLength(blob: Uint8Array, stream: number): number {
  let length = 0;
  for (let i = 0; i < BLOB_FRAME_OVERHEAD_BYTES; i++) length = length * 256 + blob[blobOffsetOf(stream + i)]!;
  return length;
}

/**
 * Packs `payloads`, in order, into a fresh 131,072-byte blob. Each payload must be non-empty (a zero
 * length ends the frame list) and there must be at least one: both are RangeError. Frames that together
 * take more than {@link BLOB_CAPACITY_BYTES} are {@link BlobPayloadTooLargeError}.
 */
export function encodeBlob(...payloads: Uint8Array[]): Uint8Array {
  if (payloads.length === 0) throw new RangeError('a blob carries at least one payload');
  let streamBytes = 0;
  let payloadBytes = 0;
  for (const [index, payload] of payloads.entries()) {
    if (payload.length === 0) {
      throw new RangeError(`blob payload ${index} is empty: a zero length would end the frame list`);
    }
    streamBytes += framedLength(payload);
    payloadBytes += payload.length;
  }
  if (streamBytes > BLOB_CAPACITY_BYTES) {
    throw new BlobPayloadTooLargeError(
      payloadBytes,
      Math.max(0, BLOB_CAPACITY_BYTES - BLOB_FRAME_OVERHEAD_BYTES * payloads.length),
      payloads.length,
    );
  }

  const blob = new Uint8Array(BLOB_BYTES);
  const prefix = new Uint8Array(BLOB_FRAME_OVERHEAD_BYTES);
  let stream = 0;
  for (const payload of payloads) {
    const length = payload.length;
    prefix[0] = length >>> 24;
    prefix[1] = (length >>> 16) & 0xff;
    prefix[2] = (length >>> 8) & 0xff;
    prefix[3] = length & 0xff;
    writeStream(blob, stream, prefix);
    writeStream(blob, stream + BLOB_FRAME_OVERHEAD_BYTES, payload);
    stream += framedLength(payload);
  }
  return blob;
}

/**
 * Checks the whole blob and calls `visit(index, start, length)` for each frame in order (`start` is the
 * stream offset of the payload's first byte); returns how many frames there are. Throws
 * {@link MalformedBlobError} (and nothing else) for anything {@link encodeBlob} does not make: blobs are
 * public and anyone can post one, so a worker must refuse junk rather than crash on it.
 */
function checkFrames(
  blob: Uint8Array,
  visit: (index: number, start: number, length: number) => void,
): number {
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

  let count = 0;
  let stream = 0;
  // Fewer than 4 stream bytes left cannot hold a frame: they end the list like a zero length.
  while (BLOB_CAPACITY_BYTES - stream >= BLOB_FRAME_OVERHEAD_BYTES) {
    const length = readLength(blob, stream);
    if (length === 0) break;
    const start = stream + BLOB_FRAME_OVERHEAD_BYTES;
    if (length > BLOB_CAPACITY_BYTES - start) {
      throw new MalformedBlobError(
        'length_past_capacity',
        `frame ${count} at stream byte ${stream} has length ${length}, past the ` +
          `${BLOB_CAPACITY_BYTES - start} stream bytes left`,
      );
    }
    visit(count++, start, length);
    stream = start + length;
  }

  // Padding (the terminator included) must be zero so that a versioned hash on chain names exactly one
  // list of payloads. The high bytes in this range were checked above, so scanning them again is harmless;
  // a full stream starts past the last blob byte and scans nothing.
  for (let offset = blobOffsetOf(stream); offset < BLOB_BYTES; offset++) {
    if (blob[offset] !== 0) {
      throw new MalformedBlobError('non_zero_padding', `non-zero padding byte at blob offset ${offset}`);
    }
  }
  if (count === 0) throw new MalformedBlobError('empty', 'the blob is all zero: it carries no payload');
  return count;
}

function readPayload(blob: Uint8Array, start: number, length: number): Uint8Array {
  const payload = new Uint8Array(length);
  readStream(blob, start, payload);
  return payload;
}

/** Every payload of a blob made by {@link encodeBlob}, in order (at least one); throws as {@link decodeBlob}. */
export function decodeBlobPayloads(blob: Uint8Array): Uint8Array[] {
  const payloads: Uint8Array[] = [];
  checkFrames(blob, (_index, start, length) => payloads.push(readPayload(blob, start, length)));
  return payloads;
}

/**
 * Payload `index` (its frame's position, from 0) of a blob made by {@link encodeBlob}. The whole blob
 * is checked, whichever payload is asked for: any other blob is {@link MalformedBlobError}, and so is
 * one without payload `index` (reason `no_such_payload`). A negative or fractional index is RangeError.
 */
export function decodeBlob(blob: Uint8Array, index = 0): Uint8Array {
  if (!Number.isInteger(index) || index < 0) {
    throw new RangeError(`a payload index is a non-negative integer, got ${index}`);
  }
  let start = 0;
  let length = -1;
  const count = checkFrames(blob, (frame, frameStart, frameLength) => {
    if (frame === index) {
      start = frameStart;
      length = frameLength;
    }
  });
  if (length < 0) {
    throw new MalformedBlobError(
      'no_such_payload',
      `the blob carries ${count} payload(s), so it has no payload ${index}`,
    );
  }
  return readPayload(blob, start, length);
}
