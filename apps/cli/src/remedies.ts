import { REMEDIES as DOCUMENTED_REMEDIES, remedyFor } from '@svc/api';

/** The `svc` command that carries out the remedy of a code, where there is one. */
const COMMANDS: Readonly<Record<string, string>> = {
  invalid_payload: 'svc pay',
  invalid_x402_version: 'svc pay',
  invalid_network: 'svc pay',
  invalid_payment_requirements: 'svc pay',
  unsupported_scheme: 'svc chat',
  invalid_api_key: 'svc keys create --save',
  delegate_not_authorized: 'svc authorize <amount>',
  insufficient_balance: 'svc authorize <amount>',
  allowance_exhausted: 'svc authorize <amount>',
  spend_cap_exceeded: 'svc keys cap <id> <amount|none>',
  payment_required: 'svc pay',
  insufficient_funds: 'svc deposit <amount>',
  invalid_prepaid_debit_payload_expired: 'svc pay',
  invalid_prepaid_debit_payload_nonce_used: 'svc pay',
  invalid_prepaid_debit_payload_signature: 'svc pay',
  invalid_prepaid_debit_payload_over_cap: 'svc pay',
  invalid_prepaid_debit_payload_facilitator_mismatch: 'svc pay',
  invalid_prepaid_debit_payload_recipient_mismatch: 'svc pay',
  invalid_prepaid_debit_facilitator_not_authorized: 'svc chat',
  model_not_found: 'svc models',
  unauthorized: 'svc login',
  api_key_not_found: 'svc keys list',
  api_key_limit: 'svc keys revoke <id>',
  api_key_revoked: 'svc keys create',
  api_key_active: 'svc keys revoke <id>',
};

/**
 * What to do about each error code the API answers: the remedy docs/api.md gives (@svc/api's REMEDIES),
 * then the `svc` command that carries it out where there is one.
 */
export const REMEDIES: Readonly<Record<string, { readonly remedy: string; readonly command?: string }>> =
  Object.fromEntries(
    Object.entries(DOCUMENTED_REMEDIES).map(([code, remedy]) => [
      code,
      COMMANDS[code] ? { remedy, command: COMMANDS[code] } : { remedy },
    ]),
  );

/**
 * The remedy of a code, and the `svc` command that carries it out. A delegate-path 402 names the least
 * value to send (`accepts[0].instruction.minimum_value_wei`), which fills in the command's amount.
 */
export function remedyOf(
  code: string | null | undefined,
  fields: Readonly<Record<string, unknown>> = {},
): { remedy: string; command?: string } | undefined {
  const entry = code ? REMEDIES[code] : undefined;
  if (!entry) return undefined;
  // The wait the answer named, in place of the generic words.
  const remedy = remedyFor(code, typeof fields.retry_after === 'number' ? fields.retry_after : undefined)!;
  if (!entry.command) return { remedy };
  const minimum = (fields.accepts as { instruction?: { minimum_value_wei?: string } }[] | undefined)?.[0]
    ?.instruction?.minimum_value_wei;
  const command =
    minimum && entry.command.startsWith('svc authorize')
      ? `svc authorize ${minimum} (or more)`
      : entry.command;
  return { remedy, command };
}
