import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { Logger, ReceivedEvent } from '@svc/platform';
import {
  JobLifecycleKind,
  PaymentPath,
  type JobLifecycleEvent,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { Prisma, type PrismaClient } from '../db/database.js';
import type { WalletAddress } from '../wallet/wallet-address.js';
import { decodeUsageCursor, encodeUsageCursor } from './usage-cursor.js';

/** One call as the usage history keeps it. */
export interface UsageCall {
  readonly callId: string;
  readonly calledAt: Date;
  readonly paymentPath: 'delegate' | 'prepaid_debit';
  /** Lowercase. */
  readonly payer: string;
  readonly keyId: string | null;
  readonly model: string;
  /** `answered`, the error code the call ended with, or null while under way. */
  readonly outcome: string | null;
  readonly jobId: string | null;
  readonly sessionId: string | null;
  readonly txHash: string | null;
  /** Lowercase. */
  readonly worker: string | null;
  /** Charged once answered; 0 with no job or a refunded fee; null while escrowed. */
  readonly feeWei: bigint | null;
  readonly droppedMessages: number;
  readonly firstOutputMs: number | null;
  readonly durationMs: number | null;
}

export interface UsageQuery {
  readonly from?: Date;
  readonly to?: Date;
  readonly keyId?: string;
  readonly cursor?: string;
  readonly limit: number;
}

export interface UsageSummary {
  readonly days: ReadonlyArray<{ day: string; keyId: string | null; spentWei: bigint; calls: number }>;
  readonly outcomes: ReadonlyArray<{ outcome: string; calls: number }>;
}

export interface UsagePage {
  readonly calls: readonly UsageCall[];
  readonly nextCursor: string | null;
  /** Over the whole selection; on the first page only. */
  readonly summary: UsageSummary | null;
}

/**
 * Which end wins when a call hears more than one: the caller's experience first (a diverged stream stays
 * `stream_diverged` even when the job is paid out later), then an answer over a failure.
 */
const OUTCOME_RANK = { pending: 0, failed: 1, answered: 2, diverged: 3 } as const;

/** The transactions that submitted the job: the one a call's usage links to. */
const SUBMISSION_KINDS = new Set([JobLifecycleKind.SUBMITTED, JobLifecycleKind.PAYMENT_SETTLED]);
/** The kinds whose fee is what the job escrowed, and those whose fee is what was charged. */
const ESCROW_KINDS = SUBMISSION_KINDS;
const CHARGE_KINDS = new Set([JobLifecycleKind.ANSWERED, JobLifecycleKind.RELEASED]);
/** Kinds whose session and worker are the job's (not a dispute's or a refund's bystanders). */
const ATTEMPT_KINDS = new Set([
  JobLifecycleKind.SESSION_OPENED,
  JobLifecycleKind.SESSION_CLAIMED,
  JobLifecycleKind.SUBMITTED,
  JobLifecycleKind.REASSIGNED,
  JobLifecycleKind.COMPLETED,
  JobLifecycleKind.ANSWERED,
  JobLifecycleKind.FAILED,
  JobLifecycleKind.DIVERGED,
]);

const MAX_INT4 = 2_147_483_647;
const WEI_DIGITS = /^[0-9]{1,78}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const BYTES32 = /^0x[0-9a-fA-F]{64}$/;
const UINT_DECIMAL = /^[0-9]{1,78}$/;

/** PostgreSQL text holds no NUL. */
function text(value: string, max: number): string | null {
  const clean = value.replaceAll('\u0000', '').slice(0, max);
  return clean === '' ? null : clean;
}
function address(hex: string | undefined): string | null {
  return hex !== undefined && ADDRESS.test(hex) ? hex.toLowerCase() : null;
}
function uintDecimal(value: string): string | null {
  return UINT_DECIMAL.test(value) ? value : null;
}
function wei(decimal: string | undefined): string | null {
  return decimal !== undefined && WEI_DIGITS.test(decimal) ? decimal : null;
}
function ms(value: number | undefined): number | null {
  return value === undefined ? null : Math.min(value, MAX_INT4);
}

/** An event's time, or now when it names none PostgreSQL can hold. */
function timeOf(event: JobLifecycleEvent): Date {
  const time = event.occurredAt ? timestampDate(event.occurredAt) : undefined;
  return time !== undefined && Math.abs(time.getTime()) < 8.64e15 && time.getUTCFullYear() < 10_000
    ? time
    : new Date();
}

/**
 * A PostgreSQL data exception (SQLSTATE class 22: a value out of range, a byte sequence it refuses): the
 * same event fails the same way every time, so retrying it would only hold up its partition.
 */
export function isDataException(error: unknown): boolean {
  const meta = (error as { meta?: { driverAdapterError?: { cause?: { originalCode?: unknown } } } }).meta;
  const code = meta?.driverAdapterError?.cause?.originalCode;
  return typeof code === 'string' && code.startsWith('22');
}

function outcomeOf(event: JobLifecycleEvent): { outcome: string | null; rank: number } {
  switch (event.kind) {
    case JobLifecycleKind.ANSWERED:
      return { outcome: 'answered', rank: OUTCOME_RANK.answered };
    case JobLifecycleKind.DIVERGED:
      return { outcome: event.failureCode || 'stream_diverged', rank: OUTCOME_RANK.diverged };
    case JobLifecycleKind.FAILED:
      return { outcome: event.failureCode || 'job_failed', rank: OUTCOME_RANK.failed };
    default:
      return { outcome: null, rank: OUTCOME_RANK.pending };
  }
}

interface UsageRow {
  call_id: string;
  called_at: Date;
  payment_path: string;
  payer: string;
  key_id: string | null;
  model: string;
  outcome: string | null;
  job_id: string | null;
  session_id: string | null;
  tx_hash: string | null;
  worker: string | null;
  charged_wei: string | null;
  refunded: boolean;
  dropped_messages: number;
  first_output_ms: number | null;
  duration_ms: number | null;
}

function callOf(row: UsageRow): UsageCall {
  let feeWei: bigint | null = null;
  if (row.refunded) feeWei = 0n;
  else if (row.charged_wei !== null) feeWei = BigInt(row.charged_wei);
  else if (row.outcome !== null && row.job_id === null) feeWei = 0n;
  return {
    callId: row.call_id,
    calledAt: row.called_at,
    paymentPath: row.payment_path === 'prepaid_debit' ? 'prepaid_debit' : 'delegate',
    payer: row.payer,
    keyId: row.key_id,
    model: row.model,
    outcome: row.outcome,
    jobId: row.job_id,
    sessionId: row.session_id,
    txHash: row.tx_hash,
    worker: row.worker,
    feeWei,
    droppedMessages: row.dropped_messages,
    firstOutputMs: row.first_output_ms,
    durationMs: row.duration_ms,
  };
}

/**
 * The usage history of `/v1` calls (GET /api/usage): one row per call, keyed by the call's id (the
 * lifecycle events' key), fed by the key-service's lifecycle consumer. Each event merges into its call's
 * row in one upsert whose every column rule is idempotent and indifferent to order (first value wins for
 * facts every event repeats, the latest attempt for the job's session and worker, a rank for the outcome),
 * so redeliveries, the job keeper's copies and two replicas handling the same event leave one row as it was.
 */
export class UsageLog {
  constructor(private readonly db: PrismaClient) {}

  async record(event: JobLifecycleEvent): Promise<void> {
    const callId = text(event.reservationId, 128);
    if (callId === null || event.kind === JobLifecycleKind.UNSPECIFIED) return;
    const payer = address(event.payer?.hex);
    if (payer === null) return;
    const { outcome, rank } = outcomeOf(event);
    const requested = event.kind === JobLifecycleKind.REQUESTED;
    const calledAt = timeOf(event);
    const attemptKind = ATTEMPT_KINDS.has(event.kind);
    const fee = wei(event.feeWei?.decimal);
    await this.db.$executeRaw`
      INSERT INTO usage_calls AS u (
        call_id, called_at, has_requested, payment_path, payer, key_id, model, request_id,
        outcome, outcome_rank, job_id, attempt, session_id, tx_hash, worker,
        escrowed_wei, charged_wei, refunded, dropped_messages, first_output_ms, duration_ms
      ) VALUES (
        ${callId}, ${calledAt}, ${requested},
        ${event.paymentPath === PaymentPath.PREPAID_DEBIT ? 'prepaid_debit' : 'delegate'},
        ${payer}, ${text(event.keyId, 64)}, ${text(event.model, 128) ?? ''}, ${text(event.requestId, 128)},
        ${outcome}, ${rank}, ${uintDecimal(event.jobId)}, ${attemptKind ? Math.min(event.attempt, MAX_INT4) : 0},
        ${attemptKind ? uintDecimal(event.sessionId) : null},
        ${SUBMISSION_KINDS.has(event.kind) && BYTES32.test(event.txHash?.hex ?? '') ? event.txHash!.hex.toLowerCase() : null},
        ${attemptKind ? address(event.worker?.hex) : null},
        ${ESCROW_KINDS.has(event.kind) ? fee : null}::numeric, ${CHARGE_KINDS.has(event.kind) ? fee : null}::numeric,
        ${event.kind === JobLifecycleKind.REFUNDED}, ${Math.min(event.droppedMessages, MAX_INT4)},
        ${ms(event.firstOutputMs)}::integer, ${ms(event.durationMs)}::integer
      )
      ON CONFLICT (call_id) DO UPDATE SET
        called_at = CASE
          WHEN u.has_requested THEN u.called_at
          WHEN EXCLUDED.has_requested THEN EXCLUDED.called_at
          ELSE LEAST(u.called_at, EXCLUDED.called_at) END,
        has_requested = u.has_requested OR EXCLUDED.has_requested,
        key_id = COALESCE(u.key_id, EXCLUDED.key_id),
        model = CASE WHEN u.model = '' THEN EXCLUDED.model ELSE u.model END,
        request_id = COALESCE(u.request_id, EXCLUDED.request_id),
        outcome = CASE WHEN EXCLUDED.outcome_rank > u.outcome_rank THEN EXCLUDED.outcome ELSE u.outcome END,
        outcome_rank = GREATEST(u.outcome_rank, EXCLUDED.outcome_rank),
        job_id = COALESCE(u.job_id, EXCLUDED.job_id),
        session_id = CASE WHEN EXCLUDED.session_id IS NOT NULL AND EXCLUDED.attempt >= u.attempt
          THEN EXCLUDED.session_id ELSE COALESCE(u.session_id, EXCLUDED.session_id) END,
        worker = CASE WHEN EXCLUDED.worker IS NOT NULL AND EXCLUDED.attempt >= u.attempt
          THEN EXCLUDED.worker ELSE COALESCE(u.worker, EXCLUDED.worker) END,
        attempt = GREATEST(u.attempt, EXCLUDED.attempt),
        tx_hash = COALESCE(u.tx_hash, EXCLUDED.tx_hash),
        escrowed_wei = COALESCE(u.escrowed_wei, EXCLUDED.escrowed_wei),
        charged_wei = COALESCE(u.charged_wei, EXCLUDED.charged_wei),
        refunded = u.refunded OR EXCLUDED.refunded,
        dropped_messages = GREATEST(u.dropped_messages, EXCLUDED.dropped_messages),
        first_output_ms = COALESCE(u.first_output_ms, EXCLUDED.first_output_ms),
        duration_ms = COALESCE(u.duration_ms, EXCLUDED.duration_ms),
        updated_at = CURRENT_TIMESTAMP`;
  }

  /**
   * The calls a wallet may see, newest first: those of its keys (deleted ones included) and its own
   * per-call payments. Pages are cut by (time, id) of the last record, so calls recorded meanwhile (newer
   * ones at the top) neither repeat nor skip a record of the following pages.
   */
  async list(wallet: WalletAddress, query: UsageQuery): Promise<UsagePage> {
    const keys = await this.db.apiKey.findMany({
      where: { wallet: wallet.lowercase },
      select: { id: true },
    });
    const keyIds = keys.map((key) => key.id);
    const visible = Prisma.sql`(${
      keyIds.length > 0 ? Prisma.sql`key_id IN (${Prisma.join(keyIds)})` : Prisma.sql`FALSE`
    } OR (payment_path = 'prepaid_debit' AND payer = ${wallet.lowercase}))`;
    const conditions = [visible];
    if (query.keyId !== undefined) conditions.push(Prisma.sql`key_id = ${query.keyId}`);
    if (query.from !== undefined) conditions.push(Prisma.sql`called_at >= ${query.from}`);
    if (query.to !== undefined) conditions.push(Prisma.sql`called_at < ${query.to}`);
    const selection = Prisma.join(conditions, ' AND ');
    const after = query.cursor === undefined ? undefined : decodeUsageCursor(query.cursor);
    const page = await this.db.$queryRaw<UsageRow[]>`
      SELECT call_id, called_at, payment_path, payer, key_id, model, outcome, job_id, session_id, tx_hash,
             worker, charged_wei::text AS charged_wei, refunded, dropped_messages, first_output_ms, duration_ms
      FROM usage_calls
      WHERE ${selection}
        ${after === undefined ? Prisma.empty : Prisma.sql`AND (called_at, call_id) < (${after.calledAt}::timestamptz, ${after.callId}::varchar)`}
      ORDER BY called_at DESC, call_id DESC
      LIMIT ${query.limit + 1}`;
    const calls = page.slice(0, query.limit).map(callOf);
    const last = calls.at(-1);
    const nextCursor =
      page.length > query.limit && last !== undefined ? encodeUsageCursor(last.calledAt, last.callId) : null;
    return {
      calls,
      nextCursor,
      summary: query.cursor === undefined ? await this.#summary(selection) : null,
    };
  }

  async #summary(selection: Prisma.Sql): Promise<UsageSummary> {
    const [days, outcomes] = await Promise.all([
      this.db.$queryRaw<Array<{ day: string; key_id: string | null; spent_wei: string; calls: bigint }>>`
        SELECT to_char(called_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, key_id,
               COALESCE(SUM(CASE WHEN refunded THEN 0 ELSE charged_wei END), 0)::text AS spent_wei,
               COUNT(*) AS calls
        FROM usage_calls WHERE ${selection}
        GROUP BY 1, 2 ORDER BY 1, 2`,
      this.db.$queryRaw<Array<{ outcome: string; calls: bigint }>>`
        SELECT COALESCE(outcome, 'pending') AS outcome, COUNT(*) AS calls
        FROM usage_calls WHERE ${selection}
        GROUP BY 1 ORDER BY 2 DESC, 1`,
    ]);
    return {
      days: days.map((row) => ({
        day: row.day,
        keyId: row.key_id,
        spentWei: BigInt(row.spent_wei),
        calls: Number(row.calls),
      })),
      outcomes: outcomes.map((row) => ({ outcome: row.outcome, calls: Number(row.calls) })),
    };
  }
}

/**
 * Records every lifecycle event in the usage history. An outage is retried by the bus (the event comes
 * again); an event whose values the database refuses is logged and skipped, since it would hold up the
 * spend settlement of every later event of its partition.
 */
export function usageRecordingHandler(usage: UsageLog, logger: Logger) {
  return async (event: ReceivedEvent<JobLifecycleEvent>): Promise<void> => {
    try {
      await usage.record(event.message);
    } catch (error) {
      if (!isDataException(error)) throw error;
      logger.warn(
        { err: error, eventId: event.eventId, reservationId: event.message.reservationId },
        'lifecycle event not recorded in the usage history: the database refuses its values',
      );
      return;
    }
    logger.debug(
      { reservationId: event.message.reservationId, kind: JobLifecycleKind[event.message.kind] },
      'usage recorded',
    );
  };
}
