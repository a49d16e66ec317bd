import { describe, expect, it } from '@jest/globals';
import { share, spendChartData } from '../src/usage/spend-chart.js';

describe('spend per day per key', () => {
  const days = [
    { day: '2026-11-20', keyId: 'a', spentWei: '300', calls: 3 },
    { day: '2026-11-20', keyId: null, spentWei: '100', calls: 1 },
    { day: '2026-11-22', keyId: 'b', spentWei: '50', calls: 1 },
    { day: '2026-11-22', keyId: 'a', spentWei: '0', calls: 2 },
  ];

  it('stacks each key per UTC day, with the days without calls in between', () => {
    const chart = spendChartData(days);
    expect(chart.series.map((s) => s.keyId)).toEqual(['a', null, 'b']);
    expect(new Set(chart.series.map((s) => s.colour)).size).toBe(3);
    expect(chart.bars.map((bar) => [bar.day, bar.spentWei, bar.totalWei, bar.calls])).toEqual([
      ['2026-11-20', [300n, 100n, 0n], 400n, 4],
      ['2026-11-21', [0n, 0n, 0n], 0n, 0],
      ['2026-11-22', [0n, 0n, 50n], 50n, 3],
    ]);
    expect(chart.maxWei).toBe(400n);
  });

  it('spans the range asked for, and nothing without bounds or days', () => {
    const chart = spendChartData(days.slice(0, 1), { first: '2026-11-19', last: '2026-11-21' });
    expect(chart.bars.map((bar) => bar.day)).toEqual(['2026-11-19', '2026-11-20', '2026-11-21']);
    expect(spendChartData([])).toEqual({ series: [], bars: [], maxWei: 0n });
  });

  it('scales wei beyond a double exactly enough', () => {
    const max = 10n ** 30n;
    expect(share(max / 4n, max)).toBe(0.25);
    expect(share(1n, 0n)).toBe(0);
  });
});
