import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { UsageListJson, UsageRecordJson } from '@svc/api';
import { AppError } from '@svc/platform';
import type { UsageRecord } from '@svc/proto/gen/svc/key/v1/usage_record_pb';
import type { Request, RequestHandler } from 'express';
import type { KeyServiceClient } from '../key-service-client.js';
import { signInToken } from './wallet-sign-in.js';

/** Records per page: 50 unless `limit` says otherwise, at most 200 (docs/api.md, Usage). */
export const USAGE_MAX_LIMIT = 200;
const ISO_TIME = /^\d{4}-\d\d-\d\d(T\d\d:\d\d(:\d\d(\.\d{1,9})?)?(Z|[+-]\d\d:\d\d))?$/;
const LIMIT = /^[0-9]{1,3}$/;
const CURSOR = /^[A-Za-z0-9_-]{1,256}$/;

/** A query parameter given at most once, as a string. */
function single(req: Request, name: string): string | undefined {
  const value = req.query[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string')
    throw new AppError('invalid_request', { message: `${name} must be given once.` });
  return value;
}

function time(req: Request, name: string): Date | undefined {
  const value = single(req, name);
  if (value === undefined) return undefined;
  const parsed = ISO_TIME.test(value) ? new Date(value) : undefined;
  if (parsed === undefined || Number.isNaN(parsed.getTime()))
    throw new AppError('invalid_request', {
      message: `${name} must be an ISO 8601 time (e.g. 2026-11-26T00:00:00Z) or date.`,
    });
  return parsed;
}

function limit(req: Request): number {
  const value = single(req, 'limit');
  if (value === undefined) return 0;
  const parsed = LIMIT.test(value) ? Number(value) : 0;
  if (parsed < 1 || parsed > USAGE_MAX_LIMIT)
    throw new AppError('invalid_request', {
      message: `limit must be a whole number from 1 to ${USAGE_MAX_LIMIT}.`,
    });
  return parsed;
}

function recordJson(record: UsageRecord): UsageRecordJson {
  return {
    id: record.callId,
    time: (record.calledAt ? timestampDate(record.calledAt) : new Date(0)).toISOString(),
    keyId: record.keyId || null,
    payer: record.payer?.hex ?? '',
    payment: record.payment === 'per_call' ? 'per_call' : 'api_key',
    model: record.model,
    outcome: record.outcome || 'pending',
    jobId: record.jobId || null,
    sessionId: record.sessionId || null,
    txHash: record.txHash?.hex ?? null,
    worker: record.worker?.hex ?? null,
    feeWei: record.feeWei?.decimal ?? null,
    droppedMessages: record.droppedMessages,
    timeToFirstTokenMs: record.firstOutputMs ?? null,
    totalTimeMs: record.durationMs ?? null,
  };
}

/**
 * `GET /usage`: the `/v1` calls of the signed-in wallet's keys and its own per-call payments, newest first,
 * a page at a time. Which calls a wallet sees is the key-service's decision, from the sign-in token.
 */
export function usageHandler(keyService: KeyServiceClient): RequestHandler {
  return async (req, res) => {
    const from = time(req, 'from');
    const to = time(req, 'to');
    if (from !== undefined && to !== undefined && from > to)
      throw new AppError('invalid_request', { message: 'from must not be after to.' });
    const key = single(req, 'key');
    if (key !== undefined && (key.length === 0 || key.length > 64))
      throw new AppError('invalid_request', { message: "key must be the id of one of the wallet's keys." });
    const cursor = single(req, 'cursor');
    if (cursor !== undefined && !CURSOR.test(cursor))
      throw new AppError('invalid_request', { message: 'cursor must be a nextCursor of this listing.' });
    const page = await keyService.listUsage({
      signInToken: signInToken(res),
      ...(from ? { from: timestampFromDate(from) } : {}),
      ...(to ? { to: timestampFromDate(to) } : {}),
      keyId: key ?? '',
      cursor: cursor ?? '',
      limit: limit(req),
    });
    const body: UsageListJson = {
      data: page.records.map(recordJson),
      nextCursor: page.nextCursor || null,
      summary:
        page.summary === undefined
          ? null
          : {
              days: page.summary.days.map((day) => ({
                day: day.day,
                keyId: day.keyId || null,
                spentWei: day.spentWei?.decimal ?? '0',
                calls: Number(day.calls),
              })),
              outcomes: page.summary.outcomes.map((o) => ({ outcome: o.outcome, calls: Number(o.calls) })),
            },
    };
    res.json(body);
  };
}
