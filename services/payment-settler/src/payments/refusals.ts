import type { PaymentRefusalCode } from '@svc/platform';

/** A payment that cannot settle: the first failed check, and whose payment it was when that is known. */
export interface PaymentRefusal {
  readonly code: PaymentRefusalCode;
  readonly message: string;
  readonly payer?: string;
}

/**
 * The refusal a settlement's revert stands for (docs/protocol.md, the revert table): the contract checks
 * in the settler's order, so both name the same failure. Undefined for a revert that is no payment
 * refusal (a session that cannot take the job, the model, the pause).
 */
export function refusalCodeOfRevert(revertName: string): PaymentRefusalCode | undefined {
  switch (revertName) {
    case 'DebitExpired':
      return 'invalid_prepaid_debit_payload_expired';
    case 'FacilitatorMismatch':
      return 'invalid_prepaid_debit_payload_facilitator_mismatch';
    case 'RecipientMismatch':
      return 'invalid_prepaid_debit_payload_recipient_mismatch';
    case 'FacilitatorNotAuthorized':
      return 'invalid_prepaid_debit_facilitator_not_authorized';
    case 'NonceAlreadyUsed':
      return 'invalid_prepaid_debit_payload_nonce_used';
    case 'DebitSignerMismatch':
    case 'ECDSAInvalidSignature':
    case 'ECDSAInvalidSignatureLength':
    case 'ECDSAInvalidSignatureS':
      return 'invalid_prepaid_debit_payload_signature';
    case 'FeeAboveMax':
      return 'invalid_prepaid_debit_payload_over_cap';
    case 'InsufficientBalance':
      return 'insufficient_funds';
    default:
      return undefined;
  }
}
