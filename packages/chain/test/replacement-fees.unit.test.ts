import { describe, expect, it } from '@jest/globals';
import { BlobFeeTooHighError, replacementFees } from '../src/index.js';

const MARKET = { maxFeePerGas: 100n, maxPriorityFeePerGas: 10n };

describe('replacementFees', () => {
  it('raises both caps of a plain transaction by at least 10%, or to the market when it is higher', () => {
    const bumped = replacementFees(
      { maxFeePerGas: 1_000n, maxPriorityFeePerGas: 100n, maxFeePerBlobGas: null },
      MARKET,
      0n,
    );
    expect(bumped.maxFeePerGas * 100n).toBeGreaterThanOrEqual(1_000n * 110n);
    expect(bumped.maxPriorityFeePerGas * 100n).toBeGreaterThanOrEqual(100n * 110n);
    expect(bumped.maxFeePerBlobGas).toBeNull();
    const market = replacementFees(
      { maxFeePerGas: 10n, maxPriorityFeePerGas: 1n, maxFeePerBlobGas: null },
      MARKET,
      0n,
    );
    expect(market).toEqual({ ...MARKET, maxFeePerBlobGas: null });
  });

  it('doubles every cap of a blob transaction and refuses a blob fee cap above the maximum', () => {
    const previous = { maxFeePerGas: 1_000n, maxPriorityFeePerGas: 100n, maxFeePerBlobGas: 7n };
    const bumped = replacementFees(previous, MARKET, 14n);
    expect(bumped.maxFeePerGas).toBeGreaterThanOrEqual(2_000n);
    expect(bumped.maxPriorityFeePerGas).toBeGreaterThanOrEqual(200n);
    expect(bumped.maxFeePerBlobGas).toBe(14n);
    expect(() => replacementFees(previous, MARKET, 13n)).toThrow(BlobFeeTooHighError);
  });

  it('moves a zero cap', () => {
    const bumped = replacementFees(
      { maxFeePerGas: 0n, maxPriorityFeePerGas: 0n, maxFeePerBlobGas: 0n },
      { maxFeePerGas: 0n, maxPriorityFeePerGas: 0n },
      10n,
    );
    expect(bumped.maxPriorityFeePerGas).toBeGreaterThan(0n);
    expect(bumped.maxFeePerBlobGas).toBeGreaterThan(0n);
  });
});
