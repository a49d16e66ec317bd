// What to do about each error code the API answers, in docs/api.md's words (its error tables; checked by
// test/remedies.test.ts). Plain data with no imports, so the web console can bundle it (`@svc/platform/remedies`).

// Remedies docs/api.md gives several codes.
const REBUILD_PAYMENT = "Rebuild the payment from the answer's PAYMENT-REQUIRED.";
const COPY_FROM_ENTRY = 'Copy both from the entry (extra.facilitatorAddress, payTo).';
const SEND_SAME_PAYMENT =
  'Send the same PAYMENT-SIGNATURE again; a payment that did settle is refused as used, so it is never charged twice.';
const WAIT_RETRY_AFTER = 'Wait retry-after seconds.';

/** The remedy docs/api.md gives each error code (backticks dropped); a code in two tables has the /v1 one. */
export const REMEDIES: Readonly<Record<string, string>> = {
  // /v1
  context_length_exceeded: 'Shorten them.',
  invalid_payload: REBUILD_PAYMENT,
  invalid_x402_version: REBUILD_PAYMENT,
  invalid_network: REBUILD_PAYMENT,
  invalid_payment_requirements: REBUILD_PAYMENT,
  unsupported_scheme: 'Send the call without the header, with an API key.',
  invalid_api_key: 'Send a valid key; on a call paid per call send no Authorization header.',
  delegate_not_authorized: 'Send the transaction in error.accepts.',
  insufficient_balance: 'Send the accepts transaction again to top up.',
  allowance_exhausted: 'Send the accepts transaction again; it adds balance and allowance.',
  spend_cap_exceeded: 'Raise or remove the cap (PATCH /api/api-keys/{id}).',
  payment_required: 'Pay the prepaid-debit entry of accepts per call, or send an API key.',
  insufficient_funds: "Call deposit() on JobRegistry from the payer's wallet.",
  invalid_prepaid_debit_payload_expired: 'Sign a new payment.',
  invalid_prepaid_debit_payload_nonce_used: 'Sign a new payment with a fresh nonce.',
  invalid_prepaid_debit_payload_signature: "Sign with the payer's key over the entry's EIP-712 domain.",
  invalid_prepaid_debit_payload_over_cap: "Set maxAmount to the entry's amount.",
  invalid_prepaid_debit_payload_facilitator_mismatch: COPY_FROM_ENTRY,
  invalid_prepaid_debit_payload_recipient_mismatch: COPY_FROM_ENTRY,
  invalid_prepaid_debit_facilitator_not_authorized: 'Pay with an API key meanwhile.',
  invalid_transaction_state: 'Retry shortly.',
  model_not_found: 'Pick an id from GET /v1/models, verbatim.',
  rate_limit_exceeded: WAIT_RETRY_AFTER,
  concurrency_limit_exceeded: 'Wait retry-after seconds, or run fewer calls at once.',
  session_open_limit_exceeded: WAIT_RETRY_AFTER,
  job_failed: 'Retry.',
  unexpected_verify_error: SEND_SAME_PAYMENT,
  unexpected_settle_error: SEND_SAME_PAYMENT,
  no_worker_available: 'Retry shortly.',
  blob_fee_too_high: 'Retry later.',
  not_configured: 'Use another network, or ask its operator.',
  // /api
  invalid_request: 'Fix the request.',
  unauthorized: 'Sign in again.',
  api_key_not_found: 'Use an id from GET /api/api-keys.',
  api_key_limit: 'Revoke a key first.',
  api_key_revoked: 'Mint a new key.',
  api_key_active: 'Revoke it first.',
  internal_error: 'Retry with backoff.',
  // Stream error events
  stream_diverged: 'Discard the received text and send the request again.',
};

/** The remedy of a code, the wait a 429 named filled in (`retry_after`, whole seconds). */
export function remedyFor(code: string | null | undefined, retryAfterSeconds?: number): string | undefined {
  const remedy = code ? REMEDIES[code] : undefined;
  if (remedy?.includes('retry-after seconds') && retryAfterSeconds !== undefined)
    return remedy.replace('retry-after seconds', `${retryAfterSeconds} seconds (retry-after)`);
  return remedy;
}
