import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  BLOB_BYTES,
  BLOB_CAPACITY_BYTES,
  BLOB_FRAME_OVERHEAD_BYTES,
  BlobPayloadTooLargeError,
  MAX_BLOB_PAYLOAD_BYTES,
  MalformedBlobError,
  decodeBlob,
  decodeBlobPayloads,
  encodeBlob,
  framedLength,
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

function caughtBy(run: () => unknown): unknown {
  try {
    run();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** Both decoders refuse `blob` for `reason`, whichever payload is asked for. */
function expectMalformed(blob: Uint8Array, reason: MalformedBlobError['reason']): void {
  for (const decode of [() => decodeBlob(blob), () => decodeBlob(blob, 1), () => decodeBlobPayloads(blob)]) {
    const caught = caughtBy(decode);
    expect(caught).toBeInstanceOf(MalformedBlobError);
    expect((caught as MalformedBlobError).reason).toBe(reason);
  }
}

/** Writes `value` as stream bytes [stream, stream + 4): the blob offset of stream byte s is s + ⌊s / 31⌋ + 1. */
function writeStreamUint32(blob: Uint8Array, stream: number, value: number): void {
  for (let i = 0; i < 4; i++) {
    const s = stream + i;
    blob[s + Math.floor(s / 31) + 1] = (value >>> (24 - 8 * i)) & 0xff;
  }
}

/** Payload lengths that add up, with their prefixes, to exactly `streamBytes`. */
function lengthsFilling(streamBytes: number, frames: number): number[] {
  const lengths = Array.from(
    { length: frames },
    () => Math.floor(streamBytes / frames) - BLOB_FRAME_OVERHEAD_BYTES,
  );
  lengths[0]! += streamBytes % frames;
  return lengths;
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

  it('encodes a single payload to the same bytes as before frames could share a blob', () => {
    // Hand-built: prefix 0x00000041 and 65 bytes 0x80.. packed 27 + 31 + 7 behind zero high bytes.
    const payload = Uint8Array.from({ length: 65 }, (_, i) => 0x80 + i);
    const expected = new Uint8Array(BLOB_BYTES);
    expected.set([0, 0, 0, 65], 1);
    expected.set(payload.subarray(0, 27), 5);
    expected.set(payload.subarray(27, 58), 33);
    expected.set(payload.subarray(58), 65);
    expectSameBytes(encodeBlob(payload), expected);
    expectSameBytes(decodeBlob(expected), payload);
  });

  it('starts each frame right after the previous one', () => {
    const first = Uint8Array.from([0xa1, 0xa2, 0xa3]);
    const second = Uint8Array.from({ length: 30 }, (_, i) => 0xb0 + i);
    const blob = encodeBlob(first, second);
    // Stream: [0, 4) prefix 3, [4, 7) first, [7, 11) prefix 30, [11, 41) second, then the zero terminator.
    // Element 0 holds stream bytes 0..30 at offsets 1..31, element 1 the rest from offset 33.
    expect(Array.from(blob.subarray(0, 12))).toEqual([0, 0, 0, 0, 3, 0xa1, 0xa2, 0xa3, 0, 0, 0, 30]);
    expectSameBytes(blob.subarray(12, 32), second.subarray(0, 20));
    expect(blob[32]).toBe(0x00);
    expectSameBytes(blob.subarray(33, 43), second.subarray(20));
    expect(blob.subarray(43).every((byte) => byte === 0)).toBe(true);
    expect(framedLength(first) + framedLength(second)).toBe(41);
    expectSameBytes(decodeBlob(blob, 0), first);
    expectSameBytes(decodeBlob(blob, 1), second);
  });

  it('fills the blob to its last byte with several frames', () => {
    for (const frames of [2, 3, 7]) {
      const payloads = lengthsFilling(BLOB_CAPACITY_BYTES, frames).map((length, i) =>
        new Uint8Array(length).fill(0x11 * (i + 1)),
      );
      expect(payloads.reduce((sum, payload) => sum + framedLength(payload), 0)).toBe(BLOB_CAPACITY_BYTES);
      const blob = encodeBlob(...payloads);
      expect(blob[BLOB_BYTES - 1]).toBe(0x11 * frames);
      expect(highBytesAreZero(blob)).toBe(true);
      const decoded = decodeBlobPayloads(blob);
      expect(decoded.length).toBe(frames);
      decoded.forEach((payload, i) => expectSameBytes(payload, payloads[i]!));
    }
  });

  it('refuses frames one byte over capacity together, with the count and what that many can carry', () => {
    const lengths = lengthsFilling(BLOB_CAPACITY_BYTES + 1, 3);
    const caught = caughtBy(() => encodeBlob(...lengths.map((length) => new Uint8Array(length))));
    expect(caught).toBeInstanceOf(BlobPayloadTooLargeError);
    const error = caught as BlobPayloadTooLargeError;
    expect(error.payloadCount).toBe(3);
    expect(error.payloadBytes).toBe(BLOB_CAPACITY_BYTES + 1 - 3 * BLOB_FRAME_OVERHEAD_BYTES);
    expect(error.maxPayloadBytes).toBe(BLOB_CAPACITY_BYTES - 3 * BLOB_FRAME_OVERHEAD_BYTES);
    expect(error.message).toMatch(/3 blob payloads/);
  });

  it('refuses an empty payload, anywhere in the list, and no payload at all', () => {
    expect(() => encodeBlob(new Uint8Array(0))).toThrow(RangeError);
    expect(() => encodeBlob(new Uint8Array(1), new Uint8Array(0), new Uint8Array(1))).toThrow(
      /payload 1 is empty/,
    );
    expect(() => encodeBlob()).toThrow(RangeError);
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
          expect((caught as BlobPayloadTooLargeError).payloadCount).toBe(1);
        },
      ),
      { numRuns: 50 },
    );
  });
});

describe('decodeBlob', () => {
  it('round-trips any payload from 1 to 126,972 bytes (property)', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.integer({ min: 1, max: MAX_BLOB_PAYLOAD_BYTES }),
          // Element boundaries and the capacity edge are where packing bugs live.
          fc.constantFrom(1, 26, 27, 28, 57, 58, 59, MAX_BLOB_PAYLOAD_BYTES - 1, MAX_BLOB_PAYLOAD_BYTES),
        ),
        fc.integer(),
        (length, seed) => {
          const payload = pseudoRandomBytes(length, seed);
          const blob = encodeBlob(payload);
          expectSameBytes(decodeBlob(blob), payload);
          const all = decodeBlobPayloads(blob);
          expect(all.length).toBe(1);
          expectSameBytes(all[0]!, payload);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('round-trips any list of payloads that fits, each by index and all at once (property)', () => {
    const payloadList = fc
      .array(
        fc.record({
          // Mostly small frames, so that many share a blob; now and then a large one.
          length: fc.oneof(
            fc.integer({ min: 1, max: 64 }),
            fc.integer({ min: 1, max: 5_000 }),
            fc.integer({ min: 1, max: 60_000 }),
          ),
          seed: fc.integer(),
        }),
        { minLength: 1, maxLength: 40 },
      )
      .map((specs) => {
        const payloads: Uint8Array[] = [];
        let streamBytes = 0;
        for (const { length, seed } of specs) {
          if (streamBytes + BLOB_FRAME_OVERHEAD_BYTES + length > BLOB_CAPACITY_BYTES) break;
          payloads.push(pseudoRandomBytes(length, seed));
          streamBytes += BLOB_FRAME_OVERHEAD_BYTES + length;
        }
        return payloads;
      });
    fc.assert(
      fc.property(payloadList, (payloads) => {
        const blob = encodeBlob(...payloads);
        expect(highBytesAreZero(blob)).toBe(true);
        const decoded = decodeBlobPayloads(blob);
        expect(decoded.length).toBe(payloads.length);
        payloads.forEach((payload, i) => {
          expectSameBytes(decoded[i]!, payload);
          expectSameBytes(decodeBlob(blob, i), payload);
        });
        const caught = caughtBy(() => decodeBlob(blob, payloads.length));
        expect(caught).toBeInstanceOf(MalformedBlobError);
        expect((caught as MalformedBlobError).reason).toBe('no_such_payload');
      }),
      { numRuns: 150 },
    );
  });

  it('asks for payload 0 by default, and refuses an index past the last payload', () => {
    const blob = encodeBlob(new Uint8Array([1]), new Uint8Array([2, 2]));
    expectSameBytes(decodeBlob(blob), new Uint8Array([1]));
    for (const index of [2, 3, 255, Number.MAX_SAFE_INTEGER]) {
      const caught = caughtBy(() => decodeBlob(blob, index));
      expect(caught).toBeInstanceOf(MalformedBlobError);
      expect((caught as MalformedBlobError).reason).toBe('no_such_payload');
    }
    expect(() => decodeBlob(blob, -1)).toThrow(RangeError);
    expect(() => decodeBlob(blob, 0.5)).toThrow(RangeError);
  });

  it('rejects the all-zero blob: it carries no payload', () => {
    expectMalformed(new Uint8Array(BLOB_BYTES), 'empty');
  });

  it('checks the whole blob whichever payload is asked for', () => {
    const blob = encodeBlob(new Uint8Array([1]), new Uint8Array([2]));
    blob[BLOB_BYTES - 1] = 0x01;
    expectMalformed(blob, 'non_zero_padding');
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
    const blob = new Uint8Array(BLOB_BYTES);
    writeStreamUint32(blob, 0, MAX_BLOB_PAYLOAD_BYTES + 1);
    expectMalformed(blob, 'length_past_capacity');
    blob.fill(0xff, 1, 5);
    expectMalformed(blob, 'length_past_capacity');
  });

  it('rejects a later frame whose length runs past capacity, by one byte', () => {
    const first = new Uint8Array(1000).fill(3);
    const blob = encodeBlob(first, new Uint8Array([4]));
    const secondPrefix = framedLength(first);
    // Exactly up to capacity is valid: the second payload (zero bytes beyond it) fills the blob.
    writeStreamUint32(blob, secondPrefix, BLOB_CAPACITY_BYTES - secondPrefix - BLOB_FRAME_OVERHEAD_BYTES);
    expect(decodeBlob(blob, 1).length).toBe(BLOB_CAPACITY_BYTES - secondPrefix - BLOB_FRAME_OVERHEAD_BYTES);
    writeStreamUint32(blob, secondPrefix, BLOB_CAPACITY_BYTES - secondPrefix - BLOB_FRAME_OVERHEAD_BYTES + 1);
    expectMalformed(blob, 'length_past_capacity');
  });

  it('rejects junk after the terminating zero length, right after it and at the very end', () => {
    // Stream (blob offset = stream + 1 this early): frames [0, 6) and [6, 11), terminator [11, 15).
    const payloads = [new Uint8Array([1, 2]), new Uint8Array([3])];
    const rightAfter = encodeBlob(...payloads);
    rightAfter[1 + 15] = 0x01;
    expectMalformed(rightAfter, 'non_zero_padding');
    const atTheEnd = encodeBlob(...payloads);
    atTheEnd[BLOB_BYTES - 1] = 0x01;
    expectMalformed(atTheEnd, 'non_zero_padding');
    // A well-formed frame after the zero length is junk too.
    const frameAfterTerminator = encodeBlob(...payloads);
    writeStreamUint32(frameAfterTerminator, 15, 1);
    frameAfterTerminator[1 + 19] = 0x07;
    expectMalformed(frameAfterTerminator, 'non_zero_padding');
  });

  it('ends the list when fewer than 4 stream bytes are left, and wants them zero', () => {
    for (const left of [1, 2, 3]) {
      const payloads = lengthsFilling(BLOB_CAPACITY_BYTES - left, 2).map((length) =>
        new Uint8Array(length).fill(9),
      );
      const blob = encodeBlob(...payloads);
      const decoded = decodeBlobPayloads(blob);
      expect(decoded.map((payload) => payload.length)).toEqual(payloads.map((payload) => payload.length));
      // The last `left` stream bytes are the last `left` bytes of the blob.
      expect(blob.subarray(BLOB_BYTES - left).every((byte) => byte === 0)).toBe(true);
      for (let offset = BLOB_BYTES - left; offset < BLOB_BYTES; offset++) {
        const straddling = new Uint8Array(blob);
        straddling[offset] = 0x01;
        expectMalformed(straddling, 'non_zero_padding');
      }
    }
  });

  it('reads the bytes right after the last payload as the next length, and the padding after it must be zero', () => {
    // Stream: prefix [0, 4), payload [4, 7), terminator [7, 11) at blob offsets 8..11, padding from 12.
    const highLength = encodeBlob(new Uint8Array([1, 2, 3]));
    highLength[8] = 0x01;
    expectMalformed(highLength, 'length_past_capacity');
    const padding = encodeBlob(new Uint8Array([1, 2, 3]));
    padding[12] = 0x01;
    expectMalformed(padding, 'non_zero_padding');
    const atTheEnd = encodeBlob(new Uint8Array([1, 2, 3]));
    atTheEnd[BLOB_BYTES - 1] = 0x01;
    expectMalformed(atTheEnd, 'non_zero_padding');
  });

  it('finds the terminator right after a payload that ends on an element boundary', () => {
    const payload = new Uint8Array(27 + 31).fill(7); // fills elements 0 and 1 exactly
    const terminatorAt = 65; // element 2, behind its high byte
    const inTerminator = encodeBlob(payload);
    inTerminator[terminatorAt] = 0x01;
    expectMalformed(inTerminator, 'length_past_capacity');
    const afterTerminator = encodeBlob(payload);
    afterTerminator[terminatorAt + 4] = 0x01;
    expectMalformed(afterTerminator, 'non_zero_padding');
  });

  it('never crashes on junk: it returns the one list of payloads that encodes to it, or throws MalformedBlobError (property)', () => {
    const junk = fc.oneof(
      // Any size, any bytes.
      fc.uint8Array({ maxLength: 300 }),
      // A valid blob with a few bytes overwritten, high bytes and prefix included.
      fc
        .record({
          length: fc.integer({ min: 1, max: MAX_BLOB_PAYLOAD_BYTES }),
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
      // A blob of several small frames with a few bytes overwritten near its prefixes and terminator.
      fc
        .record({
          lengths: fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 2, maxLength: 6 }),
          seed: fc.integer(),
          writes: fc.array(fc.tuple(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 255 })), {
            maxLength: 3,
          }),
        })
        .map(({ lengths, seed, writes }) => {
          const blob = encodeBlob(...lengths.map((length, i) => pseudoRandomBytes(length, seed + i)));
          for (const [offset, value] of writes) blob[offset] = value;
          return blob;
        }),
      // Random bytes behind zero high bytes: gets past the first check.
      fc.integer().map((seed) => {
        const blob = pseudoRandomBytes(BLOB_BYTES, seed);
        for (let element = 0; element < BLOB_BYTES; element += 32) blob[element] = 0;
        return blob;
      }),
      // Small random lengths behind zero high bytes: gets past the first length check, often several times.
      fc.integer().map((seed) => {
        const blob = pseudoRandomBytes(BLOB_BYTES, seed);
        for (let element = 0; element < BLOB_BYTES; element += 32) blob.fill(0, element, element + 4);
        return blob;
      }),
    );
    fc.assert(
      fc.property(junk, (blob) => {
        let payloads: Uint8Array[];
        try {
          payloads = decodeBlobPayloads(blob);
        } catch (error) {
          expect(error).toBeInstanceOf(MalformedBlobError);
          expect(caughtBy(() => decodeBlob(blob))).toBeInstanceOf(MalformedBlobError);
          return;
        }
        // Accepted input must be canonical: exactly the blob its payloads encode to.
        expect(payloads.length).toBeGreaterThan(0);
        expectSameBytes(encodeBlob(...payloads), blob);
        expectSameBytes(decodeBlob(blob, payloads.length - 1), payloads.at(-1)!);
      }),
      { numRuns: 300 },
    );
  });
});
