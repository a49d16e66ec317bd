import { useCallback, useEffect, useState } from 'preact/hooks';
import type { ApiKeyJson, UsageListJson, UsageRecordJson } from '@svc/api';
import { formatEth, shorten } from '../amounts.js';
import { ServiceError } from '../api/api-error.js';
import { serviceApi } from '../api/service-api.js';
import { share, spendChartData, utcDay, type SpendChartData } from '../usage/spend-chart.js';
import { ErrorNotice } from './error-notice.js';

const RANGES = [
  { value: '1', label: 'Last 24 hours' },
  { value: '7', label: 'Last 7 days' },
  { value: '30', label: 'Last 30 days' },
  { value: 'all', label: 'All time' },
] as const;
type Range = (typeof RANGES)[number]['value'];

const COLUMNS = ['Time', 'Key', 'Model', 'Outcome', 'Fee', 'First token', 'Total', 'Job and transaction'];
const PAGE_SIZE = 25;
const DAY_MS = 86_400_000;

/** Block explorers of the public chains a deployment may pay on; a devnet has none. */
const EXPLORERS: Readonly<Record<number, string>> = {
  1: 'https://etherscan.io',
  11155111: 'https://sepolia.etherscan.io',
  17000: 'https://holesky.etherscan.io',
  560048: 'https://hoodi.etherscan.io',
  8453: 'https://basescan.org',
  84532: 'https://sepolia.basescan.org',
};

function keyLabel(keys: readonly ApiKeyJson[], keyId: string | null): string {
  if (keyId === null) return 'Per-call payments';
  const key = keys.find((candidate) => candidate.id === keyId);
  if (!key) return 'Deleted key';
  return key.name ? `${key.name} (${key.prefix})` : key.prefix;
}

function duration(ms: number | null): string {
  if (ms === null) return '—';
  return ms < 1_000 ? `${ms} ms` : `${(ms / 1_000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/**
 * The wallet's usage (`GET /api/usage`): spend per day per key as a chart, calls by outcome, and every call,
 * newest first, with its job and the transaction that submitted it. Filters: a time range and a key.
 */
export function UsageView(props: {
  token: string;
  chainId?: number;
  onUnauthorized: (error: ServiceError) => void;
}) {
  const { token, onUnauthorized } = props;
  const [range, setRange] = useState<Range>('7');
  const [keyId, setKeyId] = useState('');
  const [keys, setKeys] = useState<readonly ApiKeyJson[]>([]);
  const [first, setFirst] = useState<UsageListJson>();
  const [records, setRecords] = useState<readonly UsageRecordJson[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  // The range's bounds, fixed when it is chosen or refreshed, so later pages continue the same listing.
  const [now, setNow] = useState(() => Date.now());

  const refusal = useCallback(
    (failure: unknown) => {
      if (failure instanceof ServiceError && failure.status === 401) onUnauthorized(failure);
      else setError(failure);
    },
    [onUnauthorized],
  );
  const from = range === 'all' ? undefined : new Date(now - Number(range) * DAY_MS).toISOString();

  useEffect(() => {
    serviceApi.listKeys(token).then(setKeys, refusal);
  }, [token, refusal]);
  useEffect(() => {
    setError(undefined);
    setFirst(undefined);
    serviceApi
      .usage(token, { ...(from ? { from } : {}), ...(keyId ? { key: keyId } : {}), limit: PAGE_SIZE })
      .then((page) => {
        setFirst(page);
        setRecords(page.data);
        setCursor(page.nextCursor);
      }, refusal);
  }, [token, from, keyId, refusal]);

  const more = async () => {
    if (cursor === null || busy) return;
    setBusy(true);
    try {
      const page = await serviceApi.usage(token, {
        ...(from ? { from } : {}),
        ...(keyId ? { key: keyId } : {}),
        cursor,
        limit: PAGE_SIZE,
      });
      setRecords((shown) => [...shown, ...page.data]);
      setCursor(page.nextCursor);
    } catch (failure) {
      refusal(failure);
    } finally {
      setBusy(false);
    }
  };

  const summary = first?.summary;
  const chart = summary
    ? spendChartData(summary.days, from ? { first: utcDay(Date.parse(from)), last: utcDay(now) } : {})
    : undefined;
  const totalCalls = summary?.outcomes.reduce((sum, outcome) => sum + outcome.calls, 0) ?? 0;
  const explorer = props.chainId !== undefined ? EXPLORERS[props.chainId] : undefined;

  return (
    <section aria-labelledby="usage-title">
      <div class="heading-row">
        <h1 id="usage-title">Usage</h1>
        <button type="button" onClick={() => setNow(Date.now())}>
          Refresh
        </button>
      </div>
      <p class="lead">
        Every <code>/v1</code> call of this wallet's keys, and its own per-call payments: what each cost, how
        long it took, and the job that answered it on chain.
      </p>
      <form class="card usage-filters" aria-label="Filter usage" onSubmit={(event) => event.preventDefault()}>
        <label>
          <span>Time range</span>
          <select
            name="range"
            value={range}
            onChange={(event) => setRange(event.currentTarget.value as Range)}
          >
            {RANGES.map((option) => (
              <option key={option.value} value={option.value}>
                {option.label}
              </option>
            ))}
          </select>
        </label>
        <label>
          <span>Key</span>
          <select name="key" value={keyId} onChange={(event) => setKeyId(event.currentTarget.value)}>
            <option value="">All keys and per-call payments</option>
            {keys.map((key) => (
              <option key={key.id} value={key.id}>
                {keyLabel(keys, key.id)}
              </option>
            ))}
          </select>
        </label>
      </form>
      <ErrorNotice error={error} />
      {first === undefined ? (
        error ? null : (
          <p aria-busy="true">Loading usage…</p>
        )
      ) : (
        <>
          <div class="usage-overview">
            <section class="card" aria-labelledby="spend-title">
              <h2 id="spend-title">Spend per day</h2>
              {chart && chart.maxWei > 0n ? (
                <SpendChart chart={chart} keys={keys} />
              ) : (
                <p class="empty">Nothing spent in this range.</p>
              )}
            </section>
            <section class="card" aria-labelledby="outcomes-title">
              <h2 id="outcomes-title">Calls by outcome</h2>
              {summary && summary.outcomes.length > 0 ? (
                <ul class="outcomes" data-testid="outcomes">
                  {summary.outcomes.map((outcome) => (
                    <li key={outcome.outcome}>
                      <span
                        class={`badge ${outcome.outcome === 'answered' ? 'ok' : outcome.outcome === 'pending' ? 'muted' : 'warn'}`}
                      >
                        {outcome.outcome}
                      </span>
                      <span class="outcome-bar" aria-hidden="true">
                        <span style={{ width: `${Math.max(2, (outcome.calls / totalCalls) * 100)}%` }} />
                      </span>
                      <span class="outcome-count">{outcome.calls}</span>
                    </li>
                  ))}
                </ul>
              ) : (
                <p class="empty">No calls in this range.</p>
              )}
            </section>
          </div>
          <h2>Calls</h2>
          {records.length === 0 ? (
            <p class="empty">No calls in this range.</p>
          ) : (
            <div class="table-wrap">
              <table class="keys usage" role="table">
                <caption class="visually-hidden">Calls, newest first</caption>
                <thead role="rowgroup">
                  <tr role="row">
                    {COLUMNS.map((column) => (
                      <th key={column} scope="col" role="columnheader">
                        {column}
                      </th>
                    ))}
                  </tr>
                </thead>
                <tbody role="rowgroup">
                  {records.map((record) => (
                    <UsageRow key={record.id} record={record} keys={keys} explorer={explorer} />
                  ))}
                </tbody>
              </table>
            </div>
          )}
          {cursor !== null ? (
            <div class="actions">
              <button type="button" onClick={() => void more()} disabled={busy}>
                {busy ? 'Loading…' : 'Show older calls'}
              </button>
            </div>
          ) : null}
        </>
      )}
    </section>
  );
}

function UsageRow(props: { record: UsageRecordJson; keys: readonly ApiKeyJson[]; explorer?: string }) {
  const { record, explorer } = props;
  const [copied, setCopied] = useState(false);
  const time = new Date(record.time);
  return (
    <tr role="row" data-call-id={record.id}>
      <td role="cell" data-label="Time">
        <time dateTime={record.time} title={record.time}>
          {time.toLocaleString()}
        </time>
      </td>
      <td role="cell" data-label="Key">
        {record.payment === 'per_call' && record.keyId === null ? (
          <span>Per-call payment</span>
        ) : (
          keyLabel(props.keys, record.keyId)
        )}
      </td>
      <td role="cell" data-label="Model">
        <code>{record.model}</code>
      </td>
      <td role="cell" data-label="Outcome">
        <span
          class={`badge ${record.outcome === 'answered' ? 'ok' : record.outcome === 'pending' ? 'muted' : 'warn'}`}
        >
          {record.outcome}
        </span>
        {record.droppedMessages > 0 ? (
          <span class="hint"> {record.droppedMessages} older messages dropped</span>
        ) : null}
      </td>
      <td role="cell" data-label="Fee">
        {record.feeWei === null ? <span class="hint">escrowed</span> : formatEth(record.feeWei)}
      </td>
      <td role="cell" data-label="First token">
        {duration(record.timeToFirstTokenMs)}
      </td>
      <td role="cell" data-label="Total">
        {duration(record.totalTimeMs)}
      </td>
      <td role="cell" data-label="Job and transaction">
        {record.jobId === null ? (
          <span class="hint">no job</span>
        ) : (
          <details class="job">
            <summary>Job {record.jobId}</summary>
            <dl class="facts compact">
              <dt>Transaction</dt>
              <dd>
                {record.txHash === null ? (
                  '—'
                ) : explorer ? (
                  <a
                    href={`${explorer}/tx/${record.txHash}`}
                    target="_blank"
                    rel="noreferrer"
                    title={record.txHash}
                  >
                    {shorten(record.txHash)}
                  </a>
                ) : (
                  <>
                    <code data-testid="usage-tx">{record.txHash}</code>{' '}
                    <button
                      type="button"
                      aria-label={`Copy the transaction of job ${record.jobId}`}
                      onClick={() =>
                        navigator.clipboard.writeText(record.txHash ?? '').then(
                          () => setCopied(true),
                          () => undefined,
                        )
                      }
                    >
                      {copied ? 'Copied' : 'Copy'}
                    </button>
                  </>
                )}
              </dd>
              <dt>Session</dt>
              <dd>{record.sessionId ?? '—'}</dd>
              <dt>Worker</dt>
              <dd>{record.worker ? <code title={record.worker}>{shorten(record.worker)}</code> : '—'}</dd>
            </dl>
          </details>
        )}
      </td>
    </tr>
  );
}

/** Stacked bars drawn as SVG: one bar per UTC day, one segment per key, with a legend and a data table. */
function SpendChart({ chart, keys }: { chart: SpendChartData; keys: readonly ApiKeyJson[] }) {
  const width = 640;
  const height = 200;
  const padding = { top: 20, bottom: 24, left: 8, right: 8 };
  const plotHeight = height - padding.top - padding.bottom;
  const slot = (width - padding.left - padding.right) / Math.max(chart.bars.length, 1);
  const barWidth = Math.max(2, Math.min(40, slot * 0.7));
  const labelEvery = Math.ceil(chart.bars.length / 8);
  const description = `Spend per day from ${chart.bars[0]?.day} to ${chart.bars.at(-1)?.day}; the most in one day ${formatEth(chart.maxWei)}.`;
  return (
    <figure class="spend-chart">
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={description} data-testid="spend-chart">
        <line x1={padding.left} x2={width - padding.right} y1={padding.top} y2={padding.top} class="grid" />
        <text x={padding.left} y={padding.top - 6} class="tick">
          {formatEth(chart.maxWei)}
        </text>
        <line
          x1={padding.left}
          x2={width - padding.right}
          y1={height - padding.bottom}
          y2={height - padding.bottom}
          class="axis"
        />
        {chart.bars.map((bar, index) => {
          const x = padding.left + index * slot + (slot - barWidth) / 2;
          let y = height - padding.bottom;
          return (
            <g key={bar.day}>
              <title>{`${bar.day}: ${formatEth(bar.totalWei)}, ${bar.calls} calls`}</title>
              {bar.spentWei.map((wei, series) => {
                const segment = share(wei, chart.maxWei) * plotHeight;
                y -= segment;
                return wei > 0n ? (
                  <rect
                    key={series}
                    x={x}
                    y={y}
                    width={barWidth}
                    height={Math.max(segment, 1)}
                    fill={chart.series[series]?.colour}
                  />
                ) : null;
              })}
              {index % labelEvery === 0 ? (
                <text x={x + barWidth / 2} y={height - 6} text-anchor="middle" class="tick">
                  {bar.day.slice(5)}
                </text>
              ) : null}
            </g>
          );
        })}
      </svg>
      <figcaption>
        <ul class="legend">
          {chart.series.map((series) => (
            <li key={series.keyId ?? 'per-call'}>
              <span class="swatch" style={{ background: series.colour }} aria-hidden="true" />
              {keyLabel(keys, series.keyId)}
            </li>
          ))}
        </ul>
        <span class="hint">Most in one day: {formatEth(chart.maxWei)}</span>
      </figcaption>
    </figure>
  );
}
