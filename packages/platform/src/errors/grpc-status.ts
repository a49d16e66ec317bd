import type { ApiErrorName } from '@svc/api';
import { GrpcStatus } from '@svc/proto';

/**
 * The gRPC status each catalogue error crosses a service boundary with (its name travels beside it in the
 * `x-error-code` metadata, so the far side rebuilds the exact error). Transport, not public interface: the
 * catalogue itself is `@svc/api`'s.
 */
export const GRPC_STATUS_OF_ERROR = {
  invalid_request: GrpcStatus.INVALID_ARGUMENT,
  context_length_exceeded: GrpcStatus.INVALID_ARGUMENT,
  invalid_payload: GrpcStatus.INVALID_ARGUMENT,
  invalid_x402_version: GrpcStatus.INVALID_ARGUMENT,
  unsupported_scheme: GrpcStatus.INVALID_ARGUMENT,
  invalid_network: GrpcStatus.INVALID_ARGUMENT,
  invalid_payment_requirements: GrpcStatus.INVALID_ARGUMENT,
  invalid_api_key: GrpcStatus.UNAUTHENTICATED,
  unauthorized: GrpcStatus.UNAUTHENTICATED,
  delegate_not_authorized: GrpcStatus.FAILED_PRECONDITION,
  insufficient_balance: GrpcStatus.FAILED_PRECONDITION,
  allowance_exhausted: GrpcStatus.FAILED_PRECONDITION,
  spend_cap_exceeded: GrpcStatus.FAILED_PRECONDITION,
  payment_required: GrpcStatus.FAILED_PRECONDITION,
  insufficient_funds: GrpcStatus.FAILED_PRECONDITION,
  invalid_prepaid_debit_payload_expired: GrpcStatus.FAILED_PRECONDITION,
  invalid_prepaid_debit_payload_nonce_used: GrpcStatus.FAILED_PRECONDITION,
  invalid_prepaid_debit_payload_signature: GrpcStatus.FAILED_PRECONDITION,
  invalid_prepaid_debit_payload_over_cap: GrpcStatus.FAILED_PRECONDITION,
  invalid_prepaid_debit_payload_facilitator_mismatch: GrpcStatus.FAILED_PRECONDITION,
  invalid_prepaid_debit_payload_recipient_mismatch: GrpcStatus.FAILED_PRECONDITION,
  invalid_prepaid_debit_facilitator_not_authorized: GrpcStatus.FAILED_PRECONDITION,
  invalid_transaction_state: GrpcStatus.FAILED_PRECONDITION,
  api_key_not_found: GrpcStatus.NOT_FOUND,
  model_not_found: GrpcStatus.NOT_FOUND,
  api_key_limit: GrpcStatus.FAILED_PRECONDITION,
  api_key_revoked: GrpcStatus.FAILED_PRECONDITION,
  api_key_active: GrpcStatus.FAILED_PRECONDITION,
  rate_limit_exceeded: GrpcStatus.RESOURCE_EXHAUSTED,
  concurrency_limit_exceeded: GrpcStatus.RESOURCE_EXHAUSTED,
  session_open_limit_exceeded: GrpcStatus.RESOURCE_EXHAUSTED,
  internal: GrpcStatus.INTERNAL,
  job_failed: GrpcStatus.ABORTED,
  stream_diverged: GrpcStatus.DATA_LOSS,
  unexpected_verify_error: GrpcStatus.UNAVAILABLE,
  unexpected_settle_error: GrpcStatus.UNAVAILABLE,
  no_worker_available: GrpcStatus.UNAVAILABLE,
  blob_fee_too_high: GrpcStatus.UNAVAILABLE,
  not_configured: GrpcStatus.UNAVAILABLE,
} as const satisfies Record<ApiErrorName, GrpcStatus>;
