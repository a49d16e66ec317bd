import { readChatCompletionRequest, type ChatCompletionRequest } from '@svc/api/schemas';
import { AppError } from '@svc/platform';

/**
 * Reads a `POST /v1/chat/completions` body with `@svc/api`'s schema (docs/api.md, the request table), or
 * throws the 400 OpenAI answers a bad request with: `code: null` and `param` naming the field.
 */
export function parseChatCompletionBody(body: unknown): ChatCompletionRequest {
  const read = readChatCompletionRequest(body);
  if (read.ok) return read.request;
  throw new AppError('invalid_request', { message: read.message, fields: { param: read.param } });
}
