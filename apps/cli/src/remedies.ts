// Remedies docs/api.md gives several codes.
const REBUILD_PAYMENT = "Rebuild the payment from the answer's PAYMENT-REQUIRED.";
const COPY_FROM_ENTRY = 'Copy both from the entry (extra.facilitatorAddress, payTo).';
const SEND_SAME_PAYMENT =
  'Send the same PAYMENT-SIGNATURE again; a payment that did settle is refused as used, so it is never charged twice.';
const WAIT_RETRY_AFTER = 'Wait retry-after seconds.';

/**
 * What to do about each error code the API answers: the remedy docs/api.md gives (its error tables,
 * checked by test/remedies.test.ts), then the `svc` command that carries it out where there is one.
 */
export const REMEDIES: Readonly<Record<string, { readonly remedy: string; readonly command?: string }>> = {
  // /v1
  context_length_exceeded: { remedy: 'Shorten them.' },
  invalid_payload: { remedy: REBUILD_PAYMENT, command: 'svc pay' },
  invalid_x402_version: {
    remedy: REBUILD_PAYMENT,
    command: 'svc pay',
  },
  invalid_network: { remedy: REBUILD_PAYMENT, command: 'svc pay' },
  invalid_payment_requirements: {
    remedy: REBUILD_PAYMENT,
    command: 'svc pay',
  },
  unsupported_scheme: { remedy: 'Send the call without the header, with an API key.', command: 'svc chat' },
  invalid_api_key: {
    remedy: 'Send a valid key; on a call paid per call send no Authorization header.',
    command: 'svc keys create --save',
  },
  delegate_not_authorized: {
    remedy: 'Send the transaction in error.accepts.',
    command: 'svc authorize <amount>',
  },
  insufficient_balance: {
    remedy: 'Send the accepts transaction again to top up.',
    command: 'svc authorize <amount>',
  },
  allowance_exhausted: {
    remedy: 'Send the accepts transaction again; it adds balance and allowance.',
    command: 'svc authorize <amount>',
  },
  spend_cap_exceeded: {
    remedy: 'Raise or remove the cap (PATCH /api/api-keys/{id}).',
    command: 'svc keys cap <id> <amount|none>',
  },
  payment_required: {
    remedy: 'Pay the prepaid-debit entry of accepts per call, or send an API key.',
    command: 'svc pay',
  },
  insufficient_funds: {
    remedy: "Call deposit() on JobRegistry from the payer's wallet.",
    command: 'svc deposit <amount>',
  },
  invalid_prepaid_debit_payload_expired: { remedy: 'Sign a new payment.', command: 'svc pay' },
  invalid_prepaid_debit_payload_nonce_used: {
    remedy: 'Sign a new payment with a fresh nonce.',
    command: 'svc pay',
  },
  invalid_prepaid_debit_payload_signature: {
    remedy: "Sign with the payer's key over the entry's EIP-712 domain.",
    command: 'svc pay',
  },
  invalid_prepaid_debit_payload_over_cap: {
    remedy: "Set maxAmount to the entry's amount.",
    command: 'svc pay',
  },
  invalid_prepaid_debit_payload_facilitator_mismatch: {
    remedy: COPY_FROM_ENTRY,
    command: 'svc pay',
  },
  invalid_prepaid_debit_payload_recipient_mismatch: {
    remedy: COPY_FROM_ENTRY,
    command: 'svc pay',
  },
  invalid_prepaid_debit_facilitator_not_authorized: {
    remedy: 'Pay with an API key meanwhile.',
    command: 'svc chat',
  },
  invalid_transaction_state: { remedy: 'Retry shortly.' },
  model_not_found: { remedy: 'Pick an id from GET /v1/models, verbatim.', command: 'svc models' },
  rate_limit_exceeded: { remedy: WAIT_RETRY_AFTER },
  concurrency_limit_exceeded: { remedy: 'Wait retry-after seconds, or run fewer calls at once.' },
  session_open_limit_exceeded: { remedy: WAIT_RETRY_AFTER },
  job_failed: { remedy: 'Retry.' },
  unexpected_verify_error: {
    remedy: SEND_SAME_PAYMENT,
  },
  unexpected_settle_error: {
    remedy: SEND_SAME_PAYMENT,
  },
  no_worker_available: { remedy: 'Retry shortly.' },
  blob_fee_too_high: { remedy: 'Retry later.' },
  not_configured: { remedy: 'Use another network, or ask its operator.' },
  // /api
  invalid_request: { remedy: 'Fix the request.' },
  unauthorized: { remedy: 'Sign in again.', command: 'svc login' },
  api_key_not_found: { remedy: 'Use an id from GET /api/api-keys.', command: 'svc keys list' },
  api_key_limit: { remedy: 'Revoke a key first.', command: 'svc keys revoke <id>' },
  api_key_revoked: { remedy: 'Mint a new key.', command: 'svc keys create' },
  api_key_active: { remedy: 'Revoke it first.', command: 'svc keys revoke <id>' },
  internal_error: { remedy: 'Retry with backoff.' },
  // Stream error events
  stream_diverged: { remedy: 'Discard the received text and send the request again.' },
};

/**
 * The remedy of a code, and the `svc` command that carries it out. A delegate-path 402 names the least
 * value to send (`accepts[0].instruction.minimum_value_wei`), which fills in the command's amount.
 */
export function remedyOf(
  code: string | null | undefined,
  fields: Readonly<Record<string, unknown>> = {},
): { remedy: string; command?: string } | undefined {
  const entry = code ? REMEDIES[code] : undefined;
  const retryAfter = fields.retry_after;
  // The wait the answer named, in place of the generic words.
  if (entry?.remedy.includes('retry-after seconds') && typeof retryAfter === 'number')
    return {
      ...entry,
      remedy: entry.remedy.replace('retry-after seconds', `${retryAfter} seconds (retry-after)`),
    };
  if (!entry?.command) return entry;
  const minimum = (fields.accepts as { instruction?: { minimum_value_wei?: string } }[] | undefined)?.[0]
    ?.instruction?.minimum_value_wei;
  const command =
    minimum && entry.command.startsWith('svc authorize')
      ? `svc authorize ${minimum} (or more)`
      : entry.command;
  return { remedy: entry.remedy, command };
}
