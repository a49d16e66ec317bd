/**
 * Every error the product can answer, keyed by an internal name. One entry says how the error looks on
 * each public surface: `/v1` (OpenAI shape, `error.code` may be null), `/api` (`{ error, message }`) and a
 * stream error event (code only). Between the services the internal name travels in gRPC metadata, with
 * the gRPC status `@svc/platform` gives each name (infrastructure, not part of the public interface).
 */
export interface ApiErrorSpec {
  readonly httpStatus: number;
  /** OpenAI's `error.type`. */
  readonly openaiType: string;
  /** `error.code` on `/v1`; null where docs/api.md says the code is null. Absent: not a `/v1` error. */
  readonly v1Code?: string | null;
  /** `error` on `/api`. Absent: not an `/api` error. */
  readonly apiCode?: string;
  /** `code` of the SSE error event after the first chunk. Absent: not a stream error. */
  readonly streamCode?: string;
  /** Default human-readable message; call sites usually say more. */
  readonly message: string;
}

const invalid = 'invalid_request_error';
const payment = 'payment_required';
const rate = 'rate_limit_error';
const server = 'server_error';

function x402(code: string, httpStatus: 400 | 402, message: string): ApiErrorSpec {
  return {
    httpStatus,
    openaiType: httpStatus === 400 ? invalid : payment,
    v1Code: code,
    message,
  };
}

export const API_ERRORS = {
  // 400
  invalid_request: {
    httpStatus: 400,
    openaiType: invalid,
    v1Code: null,
    apiCode: 'invalid_request',
    message: 'Invalid request.',
  },
  context_length_exceeded: {
    httpStatus: 400,
    openaiType: invalid,
    v1Code: 'context_length_exceeded',
    message:
      'System messages and the last turn do not fit one job (about 124 KiB once encrypted). Shorten them.',
  },
  invalid_payload: x402('invalid_payload', 400, 'PAYMENT-SIGNATURE is malformed.'),
  invalid_x402_version: x402('invalid_x402_version', 400, 'Unsupported x402 version.'),
  unsupported_scheme: x402('unsupported_scheme', 400, 'This server takes no such per-call payment.'),
  invalid_network: x402('invalid_network', 400, 'The payment names another network.'),
  invalid_payment_requirements: x402(
    'invalid_payment_requirements',
    400,
    'The payment was built for other requirements; rebuild it from PAYMENT-REQUIRED.',
  ),
  // 401
  invalid_api_key: {
    httpStatus: 401,
    openaiType: invalid,
    v1Code: 'invalid_api_key',
    message: 'Missing, unknown or revoked API key.',
  },
  unauthorized: {
    httpStatus: 401,
    openaiType: invalid,
    apiCode: 'unauthorized',
    message: 'Sign-in token missing, invalid or expired.',
  },
  // 402
  delegate_not_authorized: x402(
    'delegate_not_authorized',
    402,
    "The wallet behind this key has not authorized the service's signer. Send the transaction in accepts.",
  ),
  insufficient_balance: x402('insufficient_balance', 402, 'The prepaid balance cannot cover the job fee.'),
  allowance_exhausted: x402(
    'allowance_exhausted',
    402,
    'The service has spent everything the wallet allowed.',
  ),
  spend_cap_exceeded: x402('spend_cap_exceeded', 402, "The key's lifetime spend cap would be passed."),
  payment_required: x402('payment_required', 402, 'A call with no API key must carry a payment.'),
  insufficient_funds: x402('insufficient_funds', 402, "The payer's balance cannot cover the fee."),
  invalid_prepaid_debit_payload_expired: x402(
    'invalid_prepaid_debit_payload_expired',
    402,
    'The payment deadline passed.',
  ),
  invalid_prepaid_debit_payload_nonce_used: x402(
    'invalid_prepaid_debit_payload_nonce_used',
    402,
    'The payment nonce was already used.',
  ),
  invalid_prepaid_debit_payload_signature: x402(
    'invalid_prepaid_debit_payload_signature',
    402,
    'The signature does not recover to the payer over this chain and JobRegistry.',
  ),
  invalid_prepaid_debit_payload_over_cap: x402(
    'invalid_prepaid_debit_payload_over_cap',
    402,
    "The job fee is above the payment's maxAmount.",
  ),
  invalid_prepaid_debit_payload_facilitator_mismatch: x402(
    'invalid_prepaid_debit_payload_facilitator_mismatch',
    402,
    'The payment names another facilitator.',
  ),
  invalid_prepaid_debit_payload_recipient_mismatch: x402(
    'invalid_prepaid_debit_payload_recipient_mismatch',
    402,
    'The payment names another payTo.',
  ),
  invalid_prepaid_debit_facilitator_not_authorized: x402(
    'invalid_prepaid_debit_facilitator_not_authorized',
    402,
    "The server's per-call payment setup is incomplete.",
  ),
  invalid_transaction_state: x402('invalid_transaction_state', 402, 'The chain refused the settlement.'),
  // 404
  api_key_not_found: {
    httpStatus: 404,
    openaiType: invalid,
    apiCode: 'api_key_not_found',
    message: 'No API key with that id.',
  },
  model_not_found: {
    httpStatus: 404,
    openaiType: invalid,
    v1Code: 'model_not_found',
    message: 'No model by that name, or no worker serves it now.',
  },
  // 409
  api_key_limit: {
    httpStatus: 409,
    openaiType: invalid,
    apiCode: 'api_key_limit',
    message: 'The wallet already holds 25 active keys.',
  },
  api_key_revoked: {
    httpStatus: 409,
    openaiType: invalid,
    apiCode: 'api_key_revoked',
    message: 'The key is revoked; mint a new key.',
  },
  api_key_active: {
    httpStatus: 409,
    openaiType: invalid,
    apiCode: 'api_key_active',
    message: 'The key is active; revoke it first.',
  },
  // 429
  rate_limit_exceeded: {
    httpStatus: 429,
    openaiType: rate,
    v1Code: 'rate_limit_exceeded',
    apiCode: 'rate_limit_exceeded',
    message: 'Too many calls this minute.',
  },
  concurrency_limit_exceeded: {
    httpStatus: 429,
    openaiType: rate,
    v1Code: 'concurrency_limit_exceeded',
    message: 'Too many calls in flight.',
  },
  session_open_limit_exceeded: {
    httpStatus: 429,
    openaiType: rate,
    v1Code: 'session_open_limit_exceeded',
    message: 'The server opens only so many new sessions a minute.',
  },
  // 5xx
  internal: {
    httpStatus: 500,
    openaiType: server,
    v1Code: null,
    apiCode: 'internal_error',
    message: 'The server failed to answer.',
  },
  job_failed: {
    httpStatus: 502,
    openaiType: server,
    v1Code: 'job_failed',
    streamCode: 'job_failed',
    message: 'The job failed.',
  },
  stream_diverged: {
    httpStatus: 502,
    openaiType: server,
    streamCode: 'stream_diverged',
    message: 'The worker restarted its answer; the received text differs from what it committed on chain.',
  },
  unexpected_verify_error: {
    httpStatus: 502,
    openaiType: server,
    v1Code: 'unexpected_verify_error',
    message: 'The per-call payment could not be checked.',
  },
  unexpected_settle_error: {
    httpStatus: 502,
    openaiType: server,
    v1Code: 'unexpected_settle_error',
    message: 'The per-call payment could not be settled.',
  },
  no_worker_available: {
    httpStatus: 503,
    openaiType: server,
    v1Code: 'no_worker_available',
    message: 'No worker took a new session in time.',
  },
  blob_fee_too_high: {
    httpStatus: 503,
    openaiType: server,
    v1Code: 'blob_fee_too_high',
    message: 'The chain blob fee is above what the server pays to submit a prompt.',
  },
  not_configured: {
    httpStatus: 503,
    openaiType: server,
    v1Code: 'not_configured',
    apiCode: 'not_configured',
    message: 'Completions are off on this server.',
  },
} as const satisfies Record<string, ApiErrorSpec>;

export type ApiErrorName = keyof typeof API_ERRORS;

export function isApiErrorName(name: unknown): name is ApiErrorName {
  return typeof name === 'string' && Object.hasOwn(API_ERRORS, name);
}
