// The public HTTP interface of docs/api.md as code, for the gateway that answers it and the clients that
// call it (the `svc` command, the web console). Browser-safe: nothing here imports Node (its build has no
// Node types, so Buffer or a node: module does not compile). This entry has no dependency at all; the
// runtime schemas, and zod with them, are `@svc/api/schemas`, which a page need not load.

export { API_ERRORS, isApiErrorName, type ApiErrorName, type ApiErrorSpec } from './errors/catalogue.js';
export { REMEDIES, remedyFor } from './errors/remedies.js';
export { isRecord } from './json-record.js';
export {
  apiErrorBody,
  errorHeaders,
  errorOfBody,
  streamErrorEvent,
  v1ErrorBody,
  type ApiErrorBody,
  type CatalogueError,
  type ErrorOfBody,
  type StreamErrorEvent,
  type V1ErrorBody,
} from './errors/wire.js';
export type {
  ApiKeyJson,
  LimitHitsJson,
  MintedApiKeyJson,
  MintKeyRequestJson,
  SpendCapRequestJson,
} from './keys.js';
export type { ChainJson, SignInChallengeJson, SignInRequestJson, SignInResultJson } from './sign-in.js';
export type { UsageDayJson, UsageListJson, UsageOutcomeJson, UsageRecordJson } from './usage.js';
export {
  CHAT_ROLES,
  MAX_CONVERSATION_ID_LENGTH,
  SERVICE_HEADER,
  type ChatCompletionChunkJson,
  type ChatCompletionDelta,
  type ChatCompletionJson,
  type ChatCompletionRequestJson,
  type ChatMessageJson,
  type ChatRole,
  type ModelJson,
  type ModelListJson,
  type ServiceObject,
  type TextPartJson,
} from './v1/chat-completion.js';
// What the schemas read, as types only: their code (and zod) is `@svc/api/schemas`.
export type {
  ChatCompletionRequest,
  ChatMessage,
  ReadChatCompletionRequest,
} from './v1/chat-completion-request.js';
export type { PayloadFormError, ReadPayment } from './x402/payment-payload.js';
export {
  PAYMENT_REQUIRED_HEADER,
  PAYMENT_RESPONSE_HEADER,
  PAYMENT_SIGNATURE_HEADER,
  PREPAID_DEBIT,
  X402_VERSION,
  type DebitAuthorizationJson,
  type PaymentPayload,
  type PaymentRefusedResponse,
  type PaymentRequired,
  type PaymentResource,
  type PaymentResponse,
  type PaymentSettledResponse,
  type PrepaidDebitRequirements,
} from './x402/wire.js';
