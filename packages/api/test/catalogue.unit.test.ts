import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  API_ERRORS,
  apiErrorBody,
  errorHeaders,
  isApiErrorName,
  streamErrorEvent,
  v1ErrorBody,
  type ApiErrorName,
  type ApiErrorSpec,
  type CatalogueError,
} from '../src/index.js';

/** A catalogue error as the edge answers it (platform's AppError is one). */
function error(
  code: ApiErrorName,
  options: Omit<CatalogueError, 'code' | 'message'> & { message?: string } = {},
) {
  return { code, message: options.message ?? API_ERRORS[code].message, ...options };
}

const apiDocPath = fileURLToPath(new URL('../../../docs/api.md', import.meta.url));
const apiDoc = readFileSync(apiDocPath, 'utf8');

/** The cells of every table row under a heading of docs/api.md, up to the next heading. */
function tableCells(heading: string): string[][] {
  const start = apiDoc.indexOf(heading);
  expect(start).toBeGreaterThanOrEqual(0);
  const rows: string[][] = [];
  for (const line of apiDoc
    .slice(start + heading.length)
    .split('\n')
    .slice(1)) {
    if (line.startsWith('#')) break;
    if (line.trimStart().startsWith('|')) rows.push(line.split('|').map((cell) => cell.trim()));
  }
  return rows;
}

/** Rows `| <status> | <code> | ...` of the table under a heading of docs/api.md. */
function tableRows(heading: string): Array<{ status: number; code: string }> {
  const rows: Array<{ status: number; code: string }> = [];
  for (const cells of tableCells(heading)) {
    const status = Number(cells[1]);
    if (!Number.isInteger(status) || status < 100) continue;
    for (const code of (cells[2] ?? '').split(',')) rows.push({ status, code: code.trim() });
  }
  return rows;
}

/** Codes in the first column of the table `| code | ... |` under a heading of docs/api.md. */
function codeColumn(heading: string): string[] {
  return tableCells(heading)
    .map((cells) => cells[1] ?? '')
    .filter((code) => /^[a-z][a-z0-9_]*$/.test(code) && code !== 'code');
}

const byV1Code = (code: string | null, status: number): ApiErrorSpec | undefined =>
  Object.values(API_ERRORS).find(
    (entry: ApiErrorSpec) => entry.v1Code === code && entry.httpStatus === status,
  );

describe('API error catalogue against docs/api.md', () => {
  it('has every /v1 error code of docs/api.md with its status', () => {
    const rows = tableRows('### `/v1` routes');
    expect(rows.length).toBeGreaterThan(30);
    for (const { status, code } of rows) {
      const entry = byV1Code(code === 'null' ? null : code, status);
      expect({ code, status, found: entry !== undefined }).toEqual({ code, status, found: true });
    }
  });

  it('has every /api error code of docs/api.md with its status', () => {
    const rows = tableRows('### Key management (`/api`)');
    const codes = rows.map((row) => row.code);
    for (const code of [
      'unauthorized',
      'api_key_revoked',
      'api_key_active',
      'invalid_request',
      'api_key_not_found',
      'api_key_limit',
      'rate_limit_exceeded',
    ])
      expect(codes).toContain(code);
    for (const { status, code } of rows) {
      const entry = Object.values(API_ERRORS).find((e: ApiErrorSpec) => e.apiCode === code);
      expect({ code, found: entry !== undefined }).toEqual({ code, found: true });
      expect({ code, status: entry?.httpStatus }).toEqual({ code, status });
    }
    expect(API_ERRORS.unauthorized.httpStatus).toBe(401);
    expect(API_ERRORS.api_key_not_found.httpStatus).toBe(404);
    expect(API_ERRORS.api_key_limit.httpStatus).toBe(409);
  });

  it('has both stream error codes, the ones of docs/api.md', () => {
    const streamCodes = Object.values(API_ERRORS)
      .map((e: ApiErrorSpec) => e.streamCode)
      .filter(Boolean);
    expect(streamCodes.sort()).toEqual(['job_failed', 'stream_diverged']);
    expect(codeColumn('### Stream errors').sort()).toEqual(['job_failed', 'stream_diverged']);
  });
});

describe('error wire shapes', () => {
  it('renders the OpenAI shape on /v1 with extra fields inside error', () => {
    const capped = error('spend_cap_exceeded', { fields: { spend_cap_wei: '1000' } });
    expect(v1ErrorBody(capped)).toEqual({
      error: {
        message: API_ERRORS.spend_cap_exceeded.message,
        type: 'payment_required',
        param: null,
        code: 'spend_cap_exceeded',
        spend_cap_wei: '1000',
      },
    });
    expect(v1ErrorBody(error('invalid_request', { message: 'messages is required' })).error.code).toBeNull();
  });

  it('renders { error, message } on /api', () => {
    expect(apiErrorBody(error('api_key_active'))).toEqual({
      error: 'api_key_active',
      message: 'The key is active; revoke it first.',
    });
  });

  it('renders the stream error event with its code', () => {
    expect(streamErrorEvent(error('stream_diverged')).error.code).toBe('stream_diverged');
    expect(streamErrorEvent(error('job_failed')).error.code).toBe('job_failed');
  });

  it('puts retry-after on errors that carry a wait, rounded up to whole seconds', () => {
    expect(errorHeaders(error('rate_limit_exceeded', { retryAfterSeconds: 2.2 }))).toEqual({
      'retry-after': '3',
    });
    expect(errorHeaders(error('rate_limit_exceeded', { retryAfterSeconds: 0.01 }))).toEqual({
      'retry-after': '1',
    });
    expect(errorHeaders(error('job_failed'))).toEqual({});
    expect(errorHeaders(error('payment_required', { headers: { 'PAYMENT-REQUIRED': 'e30=' } }))).toEqual({
      'PAYMENT-REQUIRED': 'e30=',
    });
  });

  it("keeps a bad request's param, and answers a code with no /api spelling as internal_error there", () => {
    expect(v1ErrorBody(error('invalid_request', { fields: { param: 'model' } })).error.param).toBe('model');
    expect(apiErrorBody(error('job_failed'))).toEqual({
      error: 'internal_error',
      message: 'The job failed.',
    });
  });
});

describe('isApiErrorName', () => {
  it('knows the catalogue names, not the wire codes that differ from them or anything else', () => {
    expect(isApiErrorName('job_failed')).toBe(true);
    expect(isApiErrorName('internal')).toBe(true);
    expect(isApiErrorName('internal_error')).toBe(false);
    expect(isApiErrorName('toString')).toBe(false);
    expect(isApiErrorName(7)).toBe(false);
  });
});
