import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { AppError } from '@svc/platform';
import type { ListUsageRequest, ListUsageResponseSchema } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { getAddress } from 'ethers';
import type { UsageCall, UsagePage, UsageQuery } from '../usage/usage-log.js';

/** Records per page when the request names no limit, and the most it may name. */
export const USAGE_DEFAULT_LIMIT = 50;
export const USAGE_MAX_LIMIT = 200;

/** A ListUsage request as the usage log asks it, or `invalid_request`. */
export function usageQueryIn(request: ListUsageRequest): UsageQuery {
  const limit = request.limit === 0 ? USAGE_DEFAULT_LIMIT : request.limit;
  if (limit > USAGE_MAX_LIMIT)
    throw new AppError('invalid_request', { message: `limit must be 1 to ${USAGE_MAX_LIMIT}.` });
  const from = request.from ? timestampDate(request.from) : undefined;
  const to = request.to ? timestampDate(request.to) : undefined;
  if (from !== undefined && to !== undefined && from > to)
    throw new AppError('invalid_request', { message: 'from must not be after to.' });
  if (request.keyId.length > 64)
    throw new AppError('invalid_request', { message: 'key must be a key id of the wallet.' });
  return {
    limit,
    ...(from ? { from } : {}),
    ...(to ? { to } : {}),
    ...(request.keyId ? { keyId: request.keyId } : {}),
    ...(request.cursor ? { cursor: request.cursor } : {}),
  };
}

function recordOut(call: UsageCall) {
  return {
    callId: call.callId,
    calledAt: timestampFromDate(call.calledAt),
    keyId: call.keyId ?? '',
    payer: { hex: getAddress(call.payer) },
    payment: call.paymentPath === 'prepaid_debit' ? 'per_call' : 'api_key',
    model: call.model,
    outcome: call.outcome ?? '',
    jobId: call.jobId ?? '',
    sessionId: call.sessionId ?? '',
    ...(call.txHash ? { txHash: { hex: call.txHash } } : {}),
    ...(call.worker ? { worker: { hex: getAddress(call.worker) } } : {}),
    ...(call.feeWei === null ? {} : { feeWei: { decimal: call.feeWei.toString() } }),
    droppedMessages: call.droppedMessages,
    ...(call.firstOutputMs === null ? {} : { firstOutputMs: call.firstOutputMs }),
    ...(call.durationMs === null ? {} : { durationMs: call.durationMs }),
  };
}

export function usageResponseOut(page: UsagePage): MessageInitShape<typeof ListUsageResponseSchema> {
  return {
    records: page.calls.map(recordOut),
    nextCursor: page.nextCursor ?? '',
    ...(page.summary === null
      ? {}
      : {
          summary: {
            days: page.summary.days.map((day) => ({
              day: day.day,
              keyId: day.keyId ?? '',
              spentWei: { decimal: day.spentWei.toString() },
              calls: BigInt(day.calls),
            })),
            outcomes: page.summary.outcomes.map((o) => ({ outcome: o.outcome, calls: BigInt(o.calls) })),
          },
        }),
  };
}
