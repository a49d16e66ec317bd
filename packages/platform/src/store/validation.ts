// Argument checks shared by both implementations, so a bad call fails the same way on either.

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const CURSOR_PATTERN = /^\d{1,20}(-\d{1,20})?$/;

export function requireKey(name: string, value: string): void {
  if (typeof value !== 'string' || value.length === 0) {
    throw new RangeError(`${name} must be a non-empty string`);
  }
}

export function requirePositiveInteger(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new RangeError(`${name} must be a positive integer, got ${String(value)}`);
  }
}

export function requireNonNegativeInteger(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer, got ${String(value)}`);
  }
}

/** Counters are signed 64-bit (what Redis HINCRBY holds); `by` must be a whole number in that range. */
export function toCounterIncrement(by: bigint | number): bigint {
  if (typeof by === 'number' && !Number.isSafeInteger(by)) {
    throw new RangeError(`increment must be a safe integer, got ${String(by)}`);
  }
  const amount = BigInt(by);
  if (amount < INT64_MIN || amount > INT64_MAX) {
    throw new RangeError(`increment must fit a signed 64-bit integer, got ${amount}`);
  }
  return amount;
}

/** Most fields sealed into one tally batch unless the caller says otherwise. */
export const DEFAULT_TALLY_BATCH_FIELDS = 1000;

/** A tally grows only: `by` must be a whole number from 1 up to the signed 64-bit limit. */
export function toTallyIncrement(by: bigint | number): bigint {
  const amount = toCounterIncrement(by);
  if (amount < 1n) throw new RangeError(`a tally increment must be positive, got ${amount}`);
  return amount;
}

export function fitsInt64(value: bigint): boolean {
  return value >= INT64_MIN && value <= INT64_MAX;
}

export function requireFrameCursor(value: string): void {
  if (!CURSOR_PATTERN.test(value)) {
    throw new RangeError(`frame cursor must come from a frame read or append, got ${JSON.stringify(value)}`);
  }
}
