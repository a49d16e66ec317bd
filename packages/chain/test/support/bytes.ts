import { expect } from '@jest/globals';

/**
 * Byte equality that stays fast on 128 KiB blobs (jest's deep equality walks them element by element)
 * and still says where two arrays part.
 */
export function expectSameBytes(actual: Uint8Array, expected: Uint8Array): void {
  const a = Buffer.from(actual.buffer, actual.byteOffset, actual.byteLength);
  const b = Buffer.from(expected.buffer, expected.byteOffset, expected.byteLength);
  if (a.equals(b)) return;
  let index = 0;
  while (index < a.length && index < b.length && a[index] === b[index]) index++;
  expect({ length: a.length, firstDifference: index, byte: a[index] }).toEqual({
    length: b.length,
    firstDifference: index,
    byte: b[index],
  });
}

export function highBytesAreZero(blob: Uint8Array): boolean {
  for (let offset = 0; offset < blob.length; offset += 32) if (blob[offset] !== 0) return false;
  return true;
}
