import type { UsageDayJson } from '@svc/api';

/** One series of the chart: a key (or the per-call payments without one) and its colour. */
export interface SpendSeries {
  /** The key id, or null for per-call payments without a key. */
  readonly keyId: string | null;
  readonly colour: string;
}

/** One day's bar: each series' spend that day, in wei, in series order. */
export interface SpendBar {
  readonly day: string;
  readonly spentWei: readonly bigint[];
  readonly totalWei: bigint;
  readonly calls: number;
}

export interface SpendChartData {
  readonly series: readonly SpendSeries[];
  readonly bars: readonly SpendBar[];
  readonly maxWei: bigint;
}

/** Distinct in light and dark themes, and for the common colour-vision deficiencies (Okabe-Ito). */
const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#CC79A7', '#56B4E9', '#D55E00', '#F0E442', '#999999'];

const DAY_MS = 86_400_000;

/** `YYYY-MM-DD` of a time, in UTC (the days `summary.days` counts in). */
export function utcDay(time: number): string {
  return new Date(time).toISOString().slice(0, 10);
}

/**
 * The stacked bars of spend per day per key: one bar per UTC day from the first day to the last (days
 * without calls included, so the time axis is even), one segment per key. Days outside `[first, last]`
 * given as bounds are added too, so a range with calls on one day still shows the range.
 */
export function spendChartData(
  days: readonly UsageDayJson[],
  bounds: { readonly first?: string; readonly last?: string } = {},
): SpendChartData {
  const keys: Array<string | null> = [];
  for (const day of days) if (!keys.includes(day.keyId)) keys.push(day.keyId);
  const series = keys.map((keyId, index) => ({ keyId, colour: PALETTE[index % PALETTE.length] as string }));
  const seen = days.map((day) => day.day).sort();
  const first = [bounds.first, seen[0]].filter((d): d is string => d !== undefined).sort()[0];
  const last = [bounds.last, seen.at(-1)]
    .filter((d): d is string => d !== undefined)
    .sort()
    .at(-1);
  if (first === undefined || last === undefined) return { series, bars: [], maxWei: 0n };
  const bars: SpendBar[] = [];
  let maxWei = 0n;
  // At most a year of bars: a longer range is shown by its last year.
  const start = Math.max(Date.parse(first), Date.parse(last) - 365 * DAY_MS);
  for (let time = start; time <= Date.parse(last); time += DAY_MS) {
    const day = utcDay(time);
    const spentWei = keys.map((keyId) =>
      days
        .filter((entry) => entry.day === day && entry.keyId === keyId)
        .reduce((sum, entry) => sum + BigInt(entry.spentWei), 0n),
    );
    const totalWei = spentWei.reduce((sum, wei) => sum + wei, 0n);
    const calls = days.filter((entry) => entry.day === day).reduce((sum, entry) => sum + entry.calls, 0);
    if (totalWei > maxWei) maxWei = totalWei;
    bars.push({ day, spentWei, totalWei, calls });
  }
  return { series, bars, maxWei };
}

/** A segment's height as a share of the tallest bar, exact enough for pixels from bigint wei. */
export function share(wei: bigint, maxWei: bigint): number {
  if (maxWei === 0n) return 0;
  return Number((wei * 1_000_000n) / maxWei) / 1_000_000;
}
