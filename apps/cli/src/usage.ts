// What `svc usage` reads from its command line and prints of `GET /api/usage` (docs/api.md, Usage).
import type { UsageListJson, UsageRecordJson } from '@svc/api';
import { formatAmount } from './amounts.js';
import { usageError } from './errors.js';
import { table } from './table.js';

/** Records per page the API serves at most; `--limit` may not ask for more. */
export const USAGE_MAX_LIMIT = 200;

/** What the API accepts as `from` and `to`: an ISO 8601 time with a zone, or a date (midnight UTC). */
const ISO_TIME = /^(\d{4}-\d\d-\d\d)(T\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d))?$/;
/** A duration back from now: `30m`, `24h`, `7d`, `2w`. */
const AGO = /^([0-9]{1,6})(s|m|h|d|w)$/;
const UNIT_MS: Readonly<Record<string, number>> = {
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
};

/**
 * A time of `--since` or `--until`, as the API's `from`/`to` takes it: an ISO 8601 time with a zone or a
 * date, sent as given, or a duration back from `now` (`24h`, `7d`), sent as the UTC time it comes to.
 */
export function parseUsageTime(text: string, option: string, now: Date = new Date()): string {
  const value = text.trim();
  const ago = AGO.exec(value.toLowerCase());
  if (ago) return new Date(now.getTime() - Number(ago[1]) * UNIT_MS[ago[2]!]!).toISOString();
  const iso = ISO_TIME.exec(value);
  // Date.parse rolls 2026-02-30 over to March; the API refuses it, and so does svc.
  const calendar = iso ? new Date(`${iso[1]}T00:00:00Z`) : undefined;
  if (
    iso &&
    calendar &&
    !Number.isNaN(calendar.getTime()) &&
    calendar.toISOString().slice(0, 10) === iso[1] &&
    !Number.isNaN(new Date(value).getTime())
  )
    return value;
  throw usageError(
    `${option} "${text}" is not a time: an ISO 8601 time with a zone (2026-11-26T09:00:00Z), ` +
      'a date (2026-11-26, midnight UTC), or a duration back from now (30m, 24h, 7d, 2w)',
  );
}

/** `--limit`: records per page, 1 to 200. */
export function parseUsageLimit(text: string): number {
  const value = /^[0-9]{1,3}$/.test(text.trim()) ? Number(text.trim()) : 0;
  if (value < 1 || value > USAGE_MAX_LIMIT)
    throw usageError(`--limit "${text}" is not a whole number from 1 to ${USAGE_MAX_LIMIT}`);
  return value;
}

/** Wei as ether, without a trailing `.0`: `0.0003`, `1`, `0`. */
export function formatEther(wei: string | bigint): string {
  const value = BigInt(wei);
  const whole = value / 10n ** 18n;
  const fraction = (value % 10n ** 18n).toString().padStart(18, '0').replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : `${whole}`;
}

/** `0x1234ab…cdef`: enough of a hash to recognise; `--json` has it whole. */
export function shortHash(hash: string): string {
  return hash.length > 14 ? `${hash.slice(0, 8)}…${hash.slice(-4)}` : hash;
}

/** The key of a call, or `per call` for one paid per call (x402) with no key. */
function keyOf(record: UsageRecordJson): string {
  if (record.keyId === null) return 'per call';
  return record.payment === 'per_call' ? `${record.keyId} (per call)` : record.keyId;
}

/** The fee: ether; `escrowed` while the job holds it (null); `0` when nothing was charged. */
function feeOf(record: UsageRecordJson): string {
  return record.feeWei === null ? 'escrowed' : formatEther(record.feeWei);
}

const ms = (value: number | null) => (value === null ? '-' : String(value));

/** One row per call, newest first, as the API lists them. */
export function usageTable(records: readonly UsageRecordJson[]): string {
  return table(
    ['TIME (UTC)', 'KEY', 'MODEL', 'OUTCOME', 'FEE (ETH)', 'FIRST/TOTAL MS', 'JOB', 'TX'],
    records.map((record) => [
      record.time.slice(0, 19).replace('T', ' '),
      keyOf(record),
      record.model,
      record.outcome,
      feeOf(record),
      `${ms(record.timeToFirstTokenMs)}/${ms(record.totalTimeMs)}`,
      record.jobId ?? '-',
      record.txHash === null ? '-' : shortHash(record.txHash),
    ]),
  );
}

/**
 * The line under the table: the calls the query selects by outcome, and what they cost. From the API's
 * `summary` (every page of the query); from the records shown when there is none.
 */
export function usageSummary(list: UsageListJson, scope = ''): string {
  const outcomes =
    list.summary?.outcomes ??
    [...countBy(list.data.map((record) => record.outcome))].map(([outcome, calls]) => ({ outcome, calls }));
  const calls = outcomes.reduce((sum, entry) => sum + entry.calls, 0);
  const spent = list.summary
    ? list.summary.days.reduce((sum, day) => sum + BigInt(day.spentWei), 0n)
    : list.data.reduce((sum, record) => sum + BigInt(record.feeWei ?? '0'), 0n);
  const byOutcome = outcomes.map((entry) => `${entry.calls} ${entry.outcome}`).join(', ');
  return (
    `${calls} ${calls === 1 ? 'call' : 'calls'}${scope}` +
    `${byOutcome ? ` (${byOutcome})` : ''}, spent ${formatAmount(spent)}.`
  );
}

/** What `svc usage` prints without `--json`: the table, the summary, and whether more pages follow. */
export function renderUsage(
  list: UsageListJson,
  query: { key?: string; since?: string; until?: string } = {},
): string {
  const scope = [
    query.key === undefined ? '' : ` with key ${query.key}`,
    query.since === undefined ? '' : ` since ${query.since}`,
    query.until === undefined ? '' : ` before ${query.until}`,
  ].join('');
  if (list.data.length === 0)
    return scope
      ? `No calls${scope}.`
      : 'No calls yet: a call is listed once the service accepts it (svc chat, svc pay).';
  const lines = [usageTable(list.data), '', usageSummary(list, scope)];
  if (list.nextCursor !== null) {
    const total = list.summary?.outcomes.reduce((sum, entry) => sum + entry.calls, 0);
    lines.push(
      `Showing the newest ${list.data.length}${total === undefined ? '' : ` of ${total}`}: ` +
        `--all lists every one (--limit: up to ${USAGE_MAX_LIMIT} a page).`,
    );
  }
  return lines.join('\n');
}

function countBy(values: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const value of values) counts.set(value, (counts.get(value) ?? 0) + 1);
  return new Map([...counts].sort((a, b) => b[1] - a[1]));
}
