import { AppError } from '@svc/platform';

/** Where a page ended: the (time, id) of its last record, the order the usage is listed in. */
export interface UsageCursor {
  readonly calledAt: Date;
  readonly callId: string;
}

const CURSOR_SHAPE = /^(\d{1,15})\.(.{1,128})$/su;

/** Opaque to clients: base64url of `<epoch ms>.<call id>`. */
export function encodeUsageCursor(calledAt: Date, callId: string): string {
  return Buffer.from(`${calledAt.getTime()}.${callId}`, 'utf8').toString('base64url');
}

/** A cursor this service issued, or `invalid_request`. */
export function decodeUsageCursor(cursor: string): UsageCursor {
  const invalid = () =>
    new AppError('invalid_request', { message: 'cursor is not a nextCursor of this listing.' });
  if (cursor.length > 256 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalid();
  const match = CURSOR_SHAPE.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (match === null) throw invalid();
  const calledAt = new Date(Number(match[1]));
  if (Number.isNaN(calledAt.getTime())) throw invalid();
  return { calledAt, callId: match[2] as string };
}
