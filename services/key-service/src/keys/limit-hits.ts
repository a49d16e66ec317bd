import {
  AppError,
  LIMIT_HIT_KINDS,
  LIMIT_HITS_TALLY,
  limitHitField,
  type LimitHitKind,
  type Tallies,
} from '@svc/platform';
import { inTransaction, type PrismaClient, type Transaction } from '../db/database.js';
import type { ApiKeyView, LimitHitCounts } from './api-key-view.js';
import { isKeyId } from './key-id.js';

export type LimitKind = LimitHitKind;

const COUNTER_COLUMN = {
  rate: 'rate_hits',
  concurrency: 'concurrency_hits',
  spend_cap: 'spend_cap_hits',
  session_opens: 'session_open_hits',
} as const satisfies Record<LimitKind, string>;

const MAX_ID_LENGTH = 128;
/** A batch is one transaction; the gateway sends at most 1,000 entries per batch. */
const MAX_BATCH_ENTRIES = 10_000;
/**
 * The advisory lock (class "hits", one key) between applying batches (exclusive) and reading keys with the
 * refusals still pending in the store (shared): see `holdBatches`.
 */
const BATCHES_LOCK = [0x68697473, 0] as const;

const VIEW_FIELDS = {
  rate: 'rate',
  concurrency: 'concurrency',
  spend_cap: 'spendCap',
  session_opens: 'sessionOpens',
} as const satisfies Record<LimitKind, keyof LimitHitCounts>;

/** How often one limit refused one key's calls within a batch. */
export interface LimitHitCount {
  readonly keyId: string;
  readonly kind: LimitKind;
  readonly count: bigint;
}

/**
 * Counts refusals of a key's calls per limit (`limitHits`). Reporters send batches: aggregates per key and
 * limit under a batch id that counts once however often the batch is delivered. The single report (one
 * refusal under its request id) stays for callers that have one refusal to tell. Ids are kept for a
 * retention period and then pruned.
 *
 * Gateways count refusals in the store's `limit-hits` tally and deliver it every few seconds; a listing adds
 * what the tally holds, not yet applied, to the counts in the table (read your writes), each refusal exactly
 * once: see `holdBatches` and `withPending`.
 */
export class LimitHits {
  constructor(
    private readonly db: PrismaClient,
    /** The shared store's tallies, where gateways count refusals until they deliver them here. */
    private readonly tallies: Tallies,
  ) {}

  async record(keyId: string, kind: LimitKind, requestId: string): Promise<void> {
    if (requestId.length > MAX_ID_LENGTH) {
      throw new AppError('invalid_request', { message: 'request_id is too long.' });
    }
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

  /**
   * Adds a batch's counts to its keys, once per batch id: the id is inserted in the same transaction as the
   * increments, so a redelivered batch (its sender never saw the answer) or one delivered by two senders at
   * once adds nothing the second time. Returns whether this call applied it.
   */
  async recordBatch(batchId: string, hits: readonly LimitHitCount[]): Promise<boolean> {
    if (batchId === '' || batchId.length > MAX_ID_LENGTH) {
      throw new AppError('invalid_request', {
        message: `batch_id must be 1 to ${MAX_ID_LENGTH} characters.`,
      });
    }
    if (hits.length > MAX_BATCH_ENTRIES) {
      throw new AppError('invalid_request', {
        message: `A batch holds at most ${MAX_BATCH_ENTRIES} entries.`,
      });
    }
    if (hits.some((hit) => hit.count < 1n)) {
      throw new AppError('invalid_request', { message: 'Every count must be at least 1.' });
    }
    const perKey = aggregatePerKey(hits);
    return inTransaction(this.db, async (tx) => {
      // First, before any row is touched: no listing is between its read of the store and its commit while
      // a batch is applied (see holdBatches).
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(${BATCHES_LOCK[0]}::int4, ${BATCHES_LOCK[1]}::int4)`;
      const inserted = await tx.$executeRaw`
        INSERT INTO limit_hit_batches (batch_id) VALUES (${batchId}) ON CONFLICT DO NOTHING`;
      if (inserted === 0 || perKey.length === 0) return inserted === 1;
      const rows = JSON.stringify(perKey);
      // Rows are locked in id order, so concurrent batches touching the same keys cannot deadlock each other.
      // (The reservation sweeper locks keys in no set order: a deadlock with it aborts one side, and both
      // retry, the batch on the next flush and the sweep on the next interval; nothing is lost.)
      await tx.$queryRaw`
        SELECT id FROM api_keys
        WHERE id IN (SELECT (entry->>'id')::uuid FROM jsonb_array_elements(${rows}::jsonb) AS entry)
        ORDER BY id FOR UPDATE`;
      await tx.$executeRaw`
        UPDATE api_keys k
        SET rate_hits = k.rate_hits + h.rate,
            concurrency_hits = k.concurrency_hits + h.concurrency,
            spend_cap_hits = k.spend_cap_hits + h.spend_cap,
            session_open_hits = k.session_open_hits + h.session_opens
        FROM jsonb_to_recordset(${rows}::jsonb)
          AS h(id uuid, rate bigint, concurrency bigint, spend_cap bigint, session_opens bigint)
        WHERE k.id = h.id`;
      return true;
    });
  }

  /**
   * Keeps batches from being applied until `tx` ends (a shared advisory lock; `recordBatch` takes it
   * exclusively before it touches anything). Call it before `tx` reads or changes a key it will pass to
   * `withPending`: with no batch applied from then on, the counts `tx` reads of a key, the store's pending
   * counts and whether the store's sealed batch is applied all describe one moment, so `withPending` adds
   * each refusal exactly once. Readers do not wait for each other; a batch waits for the readers holding it
   * (a store round trip), and a reader for the batch being applied.
   */
  async holdBatches(tx: Transaction): Promise<void> {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock_shared(${BATCHES_LOCK[0]}::int4, ${BATCHES_LOCK[1]}::int4)`;
  }

  /**
   * The keys (read in `tx` after `holdBatches`) with the refusals counted in the store but not applied yet
   * added to their `limitHits`: the tally's open counts, and its sealed batch's unless `limit_hit_batches`
   * says it was applied (it stays sealed from its delivery until the gateway acknowledges it). Each refusal
   * is then counted once: in the table, open, or sealed and not yet applied. Batches sealed after the store
   * read cannot be applied before `tx` ends, and the open counts read are in no batch applied before it.
   */
  async withPending(tx: Transaction, keys: readonly ApiKeyView[]): Promise<ApiKeyView[]> {
    if (keys.length === 0) return [];
    const fields = keys.flatMap((key) => LIMIT_HIT_KINDS.map((kind) => limitHitField(kind, key.id)));
    const { open, sealed } = await this.tallies.pending(LIMIT_HITS_TALLY, fields);
    const counts = [open];
    if (sealed !== null) {
      const applied = await tx.$queryRaw<unknown[]>`
        SELECT 1 FROM limit_hit_batches WHERE batch_id = ${sealed.batchId}`;
      if (applied.length === 0) counts.push(sealed.counts);
    }
    return keys.map((key) => {
      const limitHits: { -readonly [K in keyof LimitHitCounts]: bigint } = { ...key.limitHits };
      for (const kind of LIMIT_HIT_KINDS) {
        const field = limitHitField(kind, key.id);
        for (const pending of counts) limitHits[VIEW_FIELDS[kind]] += pending[field] ?? 0n;
      }
      return { ...key, limitHits };
    });
  }

  /** Forgets report request ids and batch ids older than `retentionMs`; returns how many were dropped. */
  async pruneReports(retentionMs: number): Promise<number> {
    const reports = await this.db.$executeRaw`
      DELETE FROM limit_hit_reports WHERE reported_at < now() - ${retentionMs} * interval '1 millisecond'`;
    const batches = await this.db.$executeRaw`
      DELETE FROM limit_hit_batches WHERE applied_at < now() - ${retentionMs} * interval '1 millisecond'`;
    return reports + batches;
  }
}

type KeyRow = { id: string } & Record<LimitKind, string>;

/** One row per key with every kind's total as a decimal string; entries for ids no key can have are dropped. */
function aggregatePerKey(hits: readonly LimitHitCount[]): KeyRow[] {
  const totals = new Map<string, Record<LimitKind, bigint>>();
  for (const { keyId, kind, count } of hits) {
    // An unknown key counts nowhere: there is no listing to show it in.
    if (!isKeyId(keyId)) continue;
    const row = totals.get(keyId) ?? { rate: 0n, concurrency: 0n, spend_cap: 0n, session_opens: 0n };
    row[kind] += count;
    totals.set(keyId, row);
  }
  return [...totals].map(([id, row]) => ({
    id,
    rate: row.rate.toString(),
    concurrency: row.concurrency.toString(),
    spend_cap: row.spend_cap.toString(),
    session_opens: row.session_opens.toString(),
  }));
}
