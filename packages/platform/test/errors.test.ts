import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { GrpcStatus, RpcError } from '@svc/proto';
import {
  API_ERRORS,
  apiErrorBody,
  AppError,
  appErrorFromRpc,
  appErrorToRpc,
  errorHeaders,
  streamErrorEvent,
  v1ErrorBody,
  type ApiErrorSpec,
} from '../src/index.js';

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
    const error = new AppError('spend_cap_exceeded', { fields: { spend_cap_wei: '1000' } });
    expect(v1ErrorBody(error)).toEqual({
      error: {
        message: API_ERRORS.spend_cap_exceeded.message,
        type: 'payment_required',
        param: null,
        code: 'spend_cap_exceeded',
        spend_cap_wei: '1000',
      },
    });
    expect(
      v1ErrorBody(new AppError('invalid_request', { message: 'messages is required' })).error.code,
    ).toBeNull();
  });

  it('renders { error, message } on /api', () => {
    expect(apiErrorBody(new AppError('api_key_active'))).toEqual({
      error: 'api_key_active',
      message: 'The key is active; revoke it first.',
    });
  });

  it('renders the stream error event with its code', () => {
    expect(streamErrorEvent(new AppError('stream_diverged')).error.code).toBe('stream_diverged');
    expect(streamErrorEvent(new AppError('job_failed')).error.code).toBe('job_failed');
  });

  it('puts retry-after on errors that carry a wait, rounded up to whole seconds', () => {
    expect(errorHeaders(new AppError('rate_limit_exceeded', { retryAfterSeconds: 2.2 }))).toEqual({
      'retry-after': '3',
    });
    expect(errorHeaders(new AppError('rate_limit_exceeded', { retryAfterSeconds: 0.01 }))).toEqual({
      'retry-after': '1',
    });
    expect(errorHeaders(new AppError('job_failed'))).toEqual({});
  });
});

describe('AppError across gRPC', () => {
  it('round-trips code, message, fields, retry-after and headers', () => {
    const original = new AppError('delegate_not_authorized', {
      message: 'authorize the signer',
      fields: { accepts: [{ scheme: 'delegate', chain_id: 31337 }] },
      retryAfterSeconds: 5,
      headers: { 'PAYMENT-REQUIRED': 'e30=' },
    });
    const rpc = appErrorToRpc(original);
    expect(rpc.status).toBe(GrpcStatus.FAILED_PRECONDITION);
    // Through metadata as the adapter sends it.
    const wire = RpcError.fromServiceError({
      code: rpc.status,
      details: rpc.message,
      metadata: rpc.toMetadata(),
    });
    const rebuilt = appErrorFromRpc(wire);
    expect(rebuilt.code).toBe('delegate_not_authorized');
    expect(rebuilt.message).toBe('authorize the signer');
    expect(rebuilt.fields).toEqual(original.fields);
    expect(rebuilt.retryAfterSeconds).toBe(5);
    expect(rebuilt.headers).toEqual({ 'PAYMENT-REQUIRED': 'e30=' });
  });

  it('turns transport failures and unknown codes into internal', () => {
    expect(appErrorFromRpc(new RpcError(GrpcStatus.UNAVAILABLE, 'connection refused')).code).toBe('internal');
    expect(appErrorFromRpc(new RpcError(GrpcStatus.INTERNAL, 'x', 'not_a_code')).code).toBe('internal');
    expect(appErrorFromRpc(new Error('boom')).code).toBe('internal');
  });
});
