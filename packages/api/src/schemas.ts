// The runtime schemas of what callers send, in zod: the `POST /v1/chat/completions` body and the JSON of a
// `PAYMENT-SIGNATURE`. Each has a reader that answers the first problem as the API refuses it. Their types
// are also exported by `@svc/api` itself, which has no dependency.

export {
  chatCompletionRequestSchema,
  readChatCompletionRequest,
  type ChatCompletionRequest,
  type ChatMessage,
  type ReadChatCompletionRequest,
} from './v1/chat-completion-request.js';
export {
  paymentPayloadSchema,
  readPaymentPayload,
  type PayloadFormError,
  type ReadPayment,
} from './x402/payment-payload.js';
