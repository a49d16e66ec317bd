import { remedyFor } from '@svc/api';

/**
 * An error the service answered, in the one shape the console shows: the wire code (`/api`'s `error`,
 * `/v1`'s `error.code`), its message, and the remedy docs/api.md gives for the code.
 */
export class ServiceError extends Error {
  constructor(
    readonly status: number,
    readonly code: string | null,
    message: string,
    /** The `/v1` error's extra fields (`accepts`, `spend_cap_wei`) and `retry_after` from the header. */
    readonly fields: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
    this.name = 'ServiceError';
  }

  get remedy(): string | undefined {
    // docs/api.md: a 400 with code null names the field in its message.
    if (this.code === null) return this.status === 400 ? 'Fix the request.' : undefined;
    const retryAfter = this.fields['retry_after'];
    return remedyFor(this.code, typeof retryAfter === 'number' ? retryAfter : undefined);
  }
}

/** A failure with no answer from the service: the network, or a page the gateway did not write. */
export function unreachable(error: unknown): ServiceError {
  const reason = error instanceof Error ? error.message : String(error);
  return new ServiceError(0, null, `The service could not be reached (${reason}).`);
}

/** Whatever went wrong, as something the page can show (a wallet's refusal keeps its own words). */
export function describeFailure(error: unknown): { code: string | null; message: string; remedy?: string } {
  if (error instanceof ServiceError) {
    const remedy = error.remedy;
    return { code: error.code, message: error.message, ...(remedy ? { remedy } : {}) };
  }
  const walletError = error as { code?: unknown; shortMessage?: unknown; message?: unknown } | undefined;
  if (walletError?.code === 4001 || walletError?.code === 'ACTION_REJECTED')
    return { code: 'user_rejected', message: 'The wallet declined the request.' };
  const message =
    typeof walletError?.shortMessage === 'string'
      ? walletError.shortMessage
      : typeof walletError?.message === 'string'
        ? walletError.message
        : String(error);
  return { code: null, message };
}
