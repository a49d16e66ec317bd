import { AppError, type Store } from '@svc/platform';
import type { UnusedSessionLease } from './session-records.js';

/** The budgets of new sessions (SESSION_OPENS_* and SESSION_UNUSED_*; docs/architecture.md). */
export interface SessionOpenSettings {
  /** New sessions per minute, server-wide. */
  readonly opensPerMinute: number;
  /** Of those, the new sessions per minute for payers with no job submitted lately. */
  readonly unpaidOpensPerMinute: number;
  /** Open sessions with no submitted job one payer (wallet or per-call payer) may hold. */
  readonly perPayer: number;
  /** Open sessions with no submitted job one API key may hold. */
  readonly perKey: number;
  /** A session with no submitted job is closed this long after its claim (the keeper closes it). */
  readonly closeAfterMs: number;
  /** How long a submitted job makes its payer count as paying. */
  readonly paidMarkTtlMs: number;
}

/** Who asks for a new session. */
export interface SessionOpener {
  /** The wallet of the call's key, or the per-call payer. */
  readonly payer?: string;
  readonly keyId?: string;
  /** For a reassignment: its job is on chain and paid, so only the server-wide window applies. */
  readonly forReassignment?: boolean;
  /** A spare session the service opens ahead of demand (SessionWarmer): no caller's budget, the server-wide window only. */
  readonly spare?: boolean;
}

const SESSION_OPENS_KEY = 'sessions:opens';
const UNPAID_OPENS_KEY = 'sessions:opens:unpaid';
const MINUTE_MS = 60_000;
/** Beyond the claim window: how long an unclaimed session's budget lease may wait for its claim. */
const CLAIM_ALLOWANCE_MS = 2 * MINUTE_MS;

/**
 * What a new session costs its callers' budgets, each one operation in the shared store: the server-wide
 * opens per minute, the smaller share of them for payers that paid for no job lately, and each payer's and
 * key's leases on sessions no job was submitted in (held until the first job, the close, or their TTL).
 * Every refusal is 429 `session_open_limit_exceeded` with `retry-after`.
 */
export class SessionOpenBudget {
  constructor(
    private readonly store: Pick<Store, 'rateWindows' | 'concurrency' | 'values'>,
    readonly settings: SessionOpenSettings,
  ) {}

  /** Takes an open for `opener`: the leases the session holds until its first job, or throws the 429. */
  async take(opener: SessionOpener): Promise<UnusedSessionLease[]> {
    const { store, settings } = this;
    const taken: UnusedSessionLease[] = [];
    if (opener.forReassignment || opener.spare) {
      await this.#hit(SESSION_OPENS_KEY, settings.opensPerMinute);
      return taken;
    }
    const budgets: [string, number, string][] = [];
    if (opener.keyId) budgets.push([`sessions:unused:key:${opener.keyId}`, settings.perKey, 'API key']);
    if (opener.payer)
      budgets.push([`sessions:unused:payer:${opener.payer.toLowerCase()}`, settings.perPayer, 'wallet']);
    try {
      for (const [key, limit, holder] of budgets) {
        const lease = await store.concurrency.acquire(key, limit, settings.closeAfterMs + CLAIM_ALLOWANCE_MS);
        if (!lease.granted)
          throw new AppError('session_open_limit_exceeded', {
            message: `This ${holder} already holds ${limit} sessions in which no job was submitted; use them, or wait for them to close.`,
            retryAfterSeconds: Math.max(1, Math.ceil(lease.retryAfterMs / 1000)),
          });
        taken.push({ key, leaseId: lease.leaseId });
      }
      if (!(await this.#paid(opener.payer))) await this.#hit(UNPAID_OPENS_KEY, settings.unpaidOpensPerMinute);
      await this.#hit(SESSION_OPENS_KEY, settings.opensPerMinute);
      return taken;
    } catch (error) {
      await this.release(taken);
      throw error;
    }
  }

  /** A job was submitted for `payer`: it draws on the whole of the opens for a while. */
  async markPaid(payer: string): Promise<void> {
    await this.store.values.set(paidMarkKey(payer), '1', this.settings.paidMarkTtlMs);
  }

  /** Gives leases back (a session's first job, or its close). */
  async release(leases: readonly UnusedSessionLease[] | undefined): Promise<void> {
    for (const lease of leases ?? []) await this.store.concurrency.release(lease.key, lease.leaseId);
  }

  async #paid(payer: string | undefined): Promise<boolean> {
    return payer !== undefined && (await this.store.values.get(paidMarkKey(payer))) !== null;
  }

  async #hit(key: string, limit: number): Promise<void> {
    const verdict = await this.store.rateWindows.hit(key, limit, MINUTE_MS);
    if (!verdict.allowed)
      throw new AppError('session_open_limit_exceeded', {
        retryAfterSeconds: Math.max(1, Math.ceil(verdict.retryAfterMs / 1000)),
      });
  }
}

/** Marks a payer that had a job submitted lately. */
function paidMarkKey(payer: string): string {
  return `sessions:paid:${payer.toLowerCase()}`;
}
