import { AppError } from '@svc/platform';
import type { PrismaClient } from '../db/database.js';
import { isKeyId } from './key-id.js';

export type LimitKind = 'rate' | 'concurrency' | 'spend_cap' | 'session_opens';

const COUNTER_COLUMN = {
  rate: 'rate_hits',
  concurrency: 'concurrency_hits',
  spend_cap: 'spend_cap_hits',
  session_opens: 'session_open_hits',
} as const satisfies Record<LimitKind, string>;

/**
 * Counts refusals of a key's calls per limit (`limitHits`). A report carrying a request id counts once
 * however often it is repeated; the ids are kept for a retention period and then pruned.
 */
export class LimitHits {
  constructor(private readonly db: PrismaClient) {}

  async record(keyId: string, kind: LimitKind, requestId: string): Promise<void> {
    if (requestId.length > 128) throw new AppError('invalid_request', { message: 'request_id is too long.' });
    // A report for an unknown key counts nowhere: there is no listing to show it in.
    if (!isKeyId(keyId)) return;
    const column = COUNTER_COLUMN[kind];
    if (requestId === '') {
      await this.db.$executeRawUnsafe(
        `UPDATE api_keys SET ${column} = ${column} + 1 WHERE id = $1::uuid`,
        keyId,
      );
      return;
    }
    // The report row and the increment in one statement: a repeated report inserts nothing and adds nothing.
    await this.db.$executeRawUnsafe(
      `WITH reported AS (
         INSERT INTO limit_hit_reports (key_id, kind, request_id) VALUES ($1::uuid, $2, $3)
         ON CONFLICT DO NOTHING RETURNING key_id
       )
       UPDATE api_keys SET ${column} = ${column} + 1 FROM reported WHERE api_keys.id = reported.key_id`,
      keyId,
      kind,
      requestId,
    );
  }

  /** Forgets request ids of reports older than `retentionMs`; returns how many were dropped. */
  async pruneReports(retentionMs: number): Promise<number> {
    return this.db.$executeRaw`
      DELETE FROM limit_hit_reports WHERE reported_at < now() - ${retentionMs} * interval '1 millisecond'`;
  }
}
