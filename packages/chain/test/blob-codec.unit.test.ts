import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  BLOB_BYTES,
  BlobPayloadTooLargeError,
  MAX_BLOB_PAYLOAD_BYTES,
  MalformedBlobError,
  decodeBlob,
  encodeBlob,
} from '../src/index.js';
import { expectSameBytes, highBytesAreZero } from './support/bytes.js';

/** Deterministic pseudo-random bytes, so fast-check can shrink a seed instead of a 127 KB array. */
function pseudoRandomBytes(length: number, seed: number): Uint8Array {
  const bytes = new Uint8Array(length);
  let state = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    bytes[i] = state & 0xff;
  }
  return bytes;
}

function expectMalformed(blob: Uint8Array, reason: MalformedBlobError['reason']): void {
  let caught: unknown;
  try {
    decodeBlob(blob);
  } catch (error) {
    caught = error;
  }
  expect(caught).toBeInstanceOf(MalformedBlobError);
  expect((caught as MalformedBlobError).reason).toBe(reason);
}

describe('encodeBlob', () => {
  it('writes the big-endian length prefix into element 0 behind a zero high byte', () => {
    const blob = encodeBlob(new Uint8Array([0xaa, 0xbb, 0xcc]));
    expect(blob.length).toBe(BLOB_BYTES);
    expect(Array.from(blob.subarray(0, 8))).toEqual([0x00, 0x00, 0x00, 0x00, 0x03, 0xaa, 0xbb, 0xcc]);
    expect(blob.subarray(8).every((byte) => byte === 0)).toBe(true);
  });

  it('packs 31 bytes per element and keeps every high byte zero', () => {
    const payload = new Uint8Array(100).fill(0xff);
    const blob = encodeBlob(payload);
    // Stream bytes 0..3 are the prefix, so element 0 holds 27 payload bytes and element 1 the next 31.
    expect(blob[31]).toBe(0xff);
    expect(blob[32]).toBe(0x00);
    expect(blob[33]).toBe(0xff);
    expect(highBytesAreZero(blob)).toBe(true);
    // 4 + 100 stream bytes end at element 3, offset 1 + (104 - 93) - 1 = 11.
    expect(blob[96 + 11]).toBe(0xff);
    expect(blob[96 + 12]).toBe(0x00);
  });

  it('fills the blob to its last byte at full capacity', () => {
    const payload = new Uint8Array(MAX_BLOB_PAYLOAD_BYTES).fill(0x5a);
    const blob = encodeBlob(payload);
    expect(blob[BLOB_BYTES - 1]).toBe(0x5a);
    expect(blob[BLOB_BYTES - 32]).toBe(0x00);
    expectSameBytes(decodeBlob(blob), payload);
  });

  it('refuses one byte over capacity with a typed error', () => {
    expect(() => encodeBlob(new Uint8Array(MAX_BLOB_PAYLOAD_BYTES + 1))).toThrow(BlobPayloadTooLargeError);
  });

  it('refuses every size over capacity (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: MAX_BLOB_PAYLOAD_BYTES + 1, max: MAX_BLOB_PAYLOAD_BYTES + 70_000 }),
        (size) => {
          let caught: unknown;
          try {
            encodeBlob(new Uint8Array(size));
          } catch (error) {
            caught = error;
          }
          expect(caught).toBeInstanceOf(BlobPayloadTooLargeError);
          expect((caught as BlobPayloadTooLargeError).payloadBytes).toBe(size);
          expect((caught as BlobPayloadTooLargeError).maxPayloadBytes).toBe(MAX_BLOB_PAYLOAD_BYTES);
        },
      ),
      { numRuns: 50 },
    );
  });
});

describe('decodeBlob', () => {
  it('round-trips the empty payload', () => {
    expect(decodeBlob(encodeBlob(new Uint8Array(0)))).toEqual(new Uint8Array(0));
  });

  it('round-trips any payload from 0 to 126,972 bytes (property)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: 0, max: MAX_BLOB_PAYLOAD_BYTES }),
          // Element boundaries and the capacity edge are where packing bugs live.
          fc.constantFrom(0, 1, 26, 27, 28, 57, 58, 59, MAX_BLOB_PAYLOAD_BYTES - 1, MAX_BLOB_PAYLOAD_BYTES),
        ),
        fc.integer(),
        (length, seed) => {
          const payload = pseudoRandomBytes(length, seed);
          expectSameBytes(decodeBlob(encodeBlob(payload)), payload);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('rejects a blob of the wrong size', () => {
    expectMalformed(new Uint8Array(BLOB_BYTES - 1), 'wrong_size');
    expectMalformed(new Uint8Array(BLOB_BYTES + 1), 'wrong_size');
    expectMalformed(new Uint8Array(0), 'wrong_size');
  });

  it('rejects a non-zero high byte in any element', () => {
    const blob = encodeBlob(new Uint8Array([1, 2, 3]));
    blob[32 * 4095] = 0x01;
    expectMalformed(blob, 'non_zero_high_byte');
  });

  it('rejects a length prefix past capacity', () => {
    const blob = encodeBlob(new Uint8Array(0));
    const tooLong = MAX_BLOB_PAYLOAD_BYTES + 1;
    blob[1] = tooLong >>> 24;
    blob[2] = (tooLong >>> 16) & 0xff;
    blob[3] = (tooLong >>> 8) & 0xff;
    blob[4] = tooLong & 0xff;
    expectMalformed(blob, 'length_past_capacity');
    blob.fill(0xff, 1, 5);
    expectMalformed(blob, 'length_past_capacity');
  });

  it('rejects non-zero padding after the payload, right after it and at the very end', () => {
    const blob = encodeBlob(new Uint8Array([1, 2, 3]));
    blob[8] = 0x01;
    expectMalformed(blob, 'non_zero_padding');
    const other = encodeBlob(new Uint8Array([1, 2, 3]));
    other[BLOB_BYTES - 1] = 0x01;
    expectMalformed(other, 'non_zero_padding');
  });

  it('rejects padding right after a payload that ends on an element boundary', () => {
    const payload = new Uint8Array(27 + 31).fill(7); // fills elements 0 and 1 exactly
    const blob = encodeBlob(payload);
    blob[65] = 0x01;
    expectMalformed(blob, 'non_zero_padding');
  });

  it('never crashes on junk: it returns the one payload that encodes to it, or throws MalformedBlobError (property)', () => {
    const junk = fc.oneof(
      // Any size, any bytes.
      fc.uint8Array({ maxLength: 300 }),
      // A valid blob with a few bytes overwritten, high bytes and prefix included.
      fc
        .record({
          length: fc.integer({ min: 0, max: MAX_BLOB_PAYLOAD_BYTES }),
          seed: fc.integer(),
          writes: fc.array(
            fc.tuple(
              fc.oneof(fc.integer({ min: 0, max: BLOB_BYTES - 1 }), fc.integer({ min: 0, max: 40 })),
              fc.integer({ min: 0, max: 255 }),
            ),
            { maxLength: 6 },
          ),
        })
        .map(({ length, seed, writes }) => {
          const blob = encodeBlob(pseudoRandomBytes(length, seed));
          for (const [offset, value] of writes) blob[offset] = value;
          return blob;
        }),
      // Random bytes behind zero high bytes: gets past the first check.
      fc.integer().map((seed) => {
        const blob = pseudoRandomBytes(BLOB_BYTES, seed);
        for (let element = 0; element < BLOB_BYTES; element += 32) blob[element] = 0;
        return blob;
      }),
    );
    fc.assert(
      fc.property(junk, (blob) => {
        let payload: Uint8Array;
        try {
          payload = decodeBlob(blob);
        } catch (error) {
          expect(error).toBeInstanceOf(MalformedBlobError);
          return;
        }
        // Accepted input must be canonical: exactly the blob its payload encodes to.
        expectSameBytes(encodeBlob(payload), blob);
      }),
      { numRuns: 300 },
    );
  });
});
