import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { REMEDIES, remedyFor } from '../src/errors/remedies.js';

/** One row of an error table of docs/api.md: the table's heading, the code, and the remedy as written. */
interface DocumentedRemedy {
  readonly table: string;
  readonly code: string;
  readonly remedy: string;
}

function cellsOf(line: string): string[] {
  return line
    .trim()
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((cell) => cell.trim());
}

/**
 * The rows of every table in the "## Errors" section of docs/api.md. The code column is the one headed
 * `code` or `error` (the /v1 and /api tables have the status first); several codes share a cell, comma
 * separated; `null` is no code. The remedy is the last column.
 */
function documentedRemedies(markdown: string): { tables: string[]; rows: DocumentedRemedy[] } {
  const start = markdown.search(/^## Errors$/m);
  expect(start).toBeGreaterThanOrEqual(0);
  const rest = markdown.slice(start + '## Errors'.length);
  const end = rest.search(/^## /m);
  const section = end < 0 ? rest : rest.slice(0, end);

  const tables: string[] = [];
  const rows: DocumentedRemedy[] = [];
  let heading = '';
  let header: string[] | undefined;
  for (const line of section.split('\n')) {
    if (line.startsWith('### ')) heading = line.slice(4).trim();
    if (!line.trim().startsWith('|')) {
      header = undefined;
      continue;
    }
    const cells = cellsOf(line);
    if (!header) {
      header = cells;
      tables.push(heading);
      continue;
    }
    if (cells.every((cell) => /^:?-+:?$/.test(cell))) continue;
    const codeColumn = header.findIndex((title) => /^(code|error)$/i.test(title));
    expect(codeColumn).toBeGreaterThanOrEqual(0);
    expect(header[header.length - 1]).toBe('Remedy');
    const remedy = cells[cells.length - 1]!;
    for (const code of cells[codeColumn]!.split(',').map((text) => text.trim()))
      if (code !== 'null') rows.push({ table: heading, code, remedy });
  }
  return { tables, rows };
}

const V1_TABLE = '`/v1` routes';
const docs = documentedRemedies(readFileSync(new URL('../../../docs/api.md', import.meta.url), 'utf8'));

/** The remedy each documented code should have: the /v1 table's where tables disagree. */
function expectedRemedies(): Map<string, string> {
  const byCode = new Map<string, DocumentedRemedy[]>();
  for (const row of docs.rows) byCode.set(row.code, [...(byCode.get(row.code) ?? []), row]);
  const expected = new Map<string, string>();
  for (const [code, rows] of byCode) {
    const remedies = new Set(rows.map((row) => row.remedy));
    const chosen = remedies.size === 1 ? rows[0]! : rows.find((row) => row.table === V1_TABLE);
    // Two tables other than /v1's disagreeing would leave the remedy undecided.
    expect({ code, decided: chosen !== undefined }).toEqual({ code, decided: true });
    expected.set(code, chosen!.remedy.replace(/`/g, ''));
  }
  return expected;
}

describe("docs/api.md's error tables", () => {
  it('are found: the /v1, /api and stream tables with their codes', () => {
    expect(docs.tables).toEqual([V1_TABLE, 'Key management (`/api`)', 'Stream errors']);
    const codes = docs.rows.map((row) => row.code);
    expect(codes).toEqual(
      expect.arrayContaining([
        'invalid_api_key',
        // cells listing several codes
        'invalid_payload',
        'invalid_payment_requirements',
        'unexpected_settle_error',
        'invalid_prepaid_debit_payload_recipient_mismatch',
        // the /api table and the stream table
        'api_key_active',
        'internal_error',
        'stream_diverged',
      ]),
    );
    expect(codes).not.toContain('null');
    expect(codes.every((code) => /^[a-z0-9_]+$/.test(code))).toBe(true);
  });

  it('give job_failed a remedy in two tables, and the /v1 one is kept', () => {
    const jobFailed = docs.rows.filter((row) => row.code === 'job_failed');
    expect(jobFailed.map((row) => row.table)).toEqual([V1_TABLE, 'Stream errors']);
    expect(jobFailed[0]!.remedy).not.toBe(jobFailed[1]!.remedy);
    expect(expectedRemedies().get('job_failed')).toBe(jobFailed[0]!.remedy);
  });
});

describe('REMEDIES', () => {
  it("has docs/api.md's remedy, without backticks, for every code the docs list", () => {
    const expected = expectedRemedies();
    const actual = new Map([...expected.keys()].map((code) => [code, REMEDIES[code]]));
    expect(Object.fromEntries(actual)).toEqual(Object.fromEntries(expected));
  });

  it('has no code the docs do not list', () => {
    const documented = new Set(docs.rows.map((row) => row.code));
    expect(Object.keys(REMEDIES).filter((code) => !documented.has(code))).toEqual([]);
  });
});

describe('remedyFor', () => {
  it('is undefined for no code and for a code it does not know', () => {
    expect(remedyFor(null)).toBeUndefined();
    expect(remedyFor('')).toBeUndefined();
    expect(remedyFor('not_found')).toBeUndefined();
  });

  it('names the wait a 429 asked for, where the remedy is to wait', () => {
    expect(remedyFor('rate_limit_exceeded', 12)).toBe('Wait 12 seconds (retry-after).');
    expect(remedyFor('rate_limit_exceeded')).toBe('Wait retry-after seconds.');
    expect(remedyFor('job_failed', 12)).toBe('Retry.');
  });
});
