import { AppError } from '@svc/platform';
import type { ChatMessage, ChatRole } from './completion-backend.js';

/** A valid `POST /v1/chat/completions` body, as far as the gateway reads it. */
export interface ChatCompletionBody {
  readonly model: string;
  readonly messages: readonly ChatMessage[];
  readonly stream: boolean;
  readonly conversationId?: string;
}

const ROLES: ReadonlySet<string> = new Set<ChatRole>(['system', 'developer', 'user', 'assistant']);
const MAX_CONVERSATION_ID_LENGTH = 64;
// Text parts of one message are joined into the one string a job carries.
const TEXT_PART_SEPARATOR = '\n';

type JsonObject = Readonly<Record<string, unknown>>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** 400 with `code: null` and `param` naming the field, the way OpenAI answers a bad request. */
function invalid(param: string, message: string): AppError {
  return new AppError('invalid_request', { message, fields: { param } });
}

function isPresent(value: unknown): boolean {
  return value !== undefined && value !== null;
}

function refuseTools(body: JsonObject): void {
  for (const field of ['tools', 'functions'])
    if (isPresent(body[field]) && !(Array.isArray(body[field]) && body[field].length === 0))
      throw invalid(field, 'Tools and function calling are not supported.');
  for (const field of ['tool_choice', 'function_call'])
    if (isPresent(body[field]) && body[field] !== 'none')
      throw invalid(field, 'Tools and function calling are not supported.');
}

function textOfPart(part: unknown, param: string): string {
  if (!isObject(part) || typeof part.type !== 'string')
    throw invalid(param, `${param} must be a content part object with a type.`);
  if (part.type === 'image_url' || part.type === 'input_image')
    throw invalid(param, 'Image content parts are not supported; send text only.');
  if (part.type !== 'text')
    throw invalid(param, `Content part type "${part.type}" is not supported; send text parts only.`);
  if (typeof part.text !== 'string') throw invalid(`${param}.text`, `${param}.text must be a string.`);
  return part.text;
}

function contentOf(message: JsonObject, param: string): string {
  const { content } = message;
  if (typeof content === 'string') return content;
  if (Array.isArray(content))
    return content.map((part, index) => textOfPart(part, `${param}[${index}]`)).join(TEXT_PART_SEPARATOR);
  throw invalid(param, `${param} must be a string or a list of text parts.`);
}

function messageOf(value: unknown, index: number): ChatMessage {
  const param = `messages[${index}]`;
  if (!isObject(value)) throw invalid(param, `${param} must be an object with a role and content.`);
  const { role } = value;
  if (role === undefined) throw invalid(`${param}.role`, `${param}.role is required.`);
  if (role === 'tool' || role === 'function')
    throw invalid(`${param}.role`, `Role "${role}" is not supported: tools and function calling are not.`);
  if (typeof role !== 'string' || !ROLES.has(role))
    throw invalid(
      `${param}.role`,
      `${param}.role ${JSON.stringify(role)} is not supported; use system, developer, user or assistant.`,
    );
  if (isPresent(value.tool_calls) || isPresent(value.function_call))
    throw invalid(param, 'Tools and function calling are not supported.');
  return { role: role as ChatRole, content: contentOf(value, `${param}.content`) };
}

function messagesOf(body: JsonObject): ChatMessage[] {
  const { messages } = body;
  if (!isPresent(messages)) throw invalid('messages', 'messages is required.');
  if (!Array.isArray(messages)) throw invalid('messages', 'messages must be a list of messages.');
  if (messages.length === 0) throw invalid('messages', 'messages must hold at least one message.');
  const parsed = messages.map(messageOf);
  if (parsed.at(-1)?.role !== 'user')
    throw invalid(`messages[${parsed.length - 1}].role`, "The last message must be the user's.");
  return parsed;
}

function conversationIdOf(body: JsonObject): string | undefined {
  const value = body.conversation_id;
  if (!isPresent(value)) return undefined;
  if (typeof value !== 'string') throw invalid('conversation_id', 'conversation_id must be a string.');
  // Characters as docs/api.md counts them: code points, not UTF-16 units.
  if ([...value].length > MAX_CONVERSATION_ID_LENGTH)
    throw invalid(
      'conversation_id',
      `conversation_id must be at most ${MAX_CONVERSATION_ID_LENGTH} characters.`,
    );
  return value === '' ? undefined : value;
}

/**
 * Checks a chat completion body against the request table of docs/api.md. Other OpenAI fields (temperature,
 * max_tokens, top_p, ...) are accepted and ignored.
 */
export function parseChatCompletionBody(body: unknown): ChatCompletionBody {
  if (!isObject(body)) throw invalid('body', 'The body must be a JSON object.');
  const { model, stream } = body;
  if (!isPresent(model)) throw invalid('model', 'model is required: an id from GET /v1/models.');
  if (typeof model !== 'string' || model === '')
    throw invalid('model', 'model must be a model id from GET /v1/models.');
  const messages = messagesOf(body);
  refuseTools(body);
  if (isPresent(stream) && typeof stream !== 'boolean') throw invalid('stream', 'stream must be a boolean.');
  return { model, messages, stream: stream === true, conversationId: conversationIdOf(body) };
}
