import { randomBytes } from 'node:crypto';
import { InvalidPromptError } from '../errors.js';
import { AES_KEY_BYTES } from './aes-gcm.js';
import { asBuffer } from './bytes.js';
import { isRecord } from '@svc/api';

/**
 * Prompt plaintext v1 (docs/protocol.md, Encryption), UTF-8 JSON:
 *   {"v":1,"model":"…","messages":[{"role":"…","content":"…"}],"replyKey":"<base64 of 32 bytes>"}
 * Keys are written in exactly that order. Content is a plain string (text parts are joined before
 * this point); the last message is the user's. Unknown fields are ignored on decode.
 */
export const PROMPT_PLAINTEXT_VERSION = 1;
export const REPLY_KEY_BYTES = AES_KEY_BYTES;

export const PROMPT_ROLES = ['system', 'developer', 'user', 'assistant'] as const;
export type PromptRole = (typeof PROMPT_ROLES)[number];

export interface PromptMessage {
  readonly role: PromptRole;
  readonly content: string;
}

export interface Prompt {
  /** The model name exactly as listed (colons included). */
  readonly model: string;
  readonly messages: readonly PromptMessage[];
  /** 32-byte AES-256-GCM key the worker encrypts every answer frame with. */
  readonly replyKey: Uint8Array;
}

/** A fresh 32-byte reply key for one job attempt's prompt. */
export function generateReplyKey(): Uint8Array {
  return new Uint8Array(randomBytes(REPLY_KEY_BYTES));
}

const utf8Encoder = new TextEncoder();
const utf8Decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

export function encodePromptPlaintext(prompt: Prompt): Uint8Array {
  // Validating on the way out too keeps a malformed prompt from costing a blob transaction.
  checkPromptFields(prompt.model, prompt.messages, prompt.replyKey);
  const json = JSON.stringify({
    v: PROMPT_PLAINTEXT_VERSION,
    model: prompt.model,
    messages: prompt.messages.map(({ role, content }) => ({ role, content })),
    replyKey: asBuffer(prompt.replyKey).toString('base64'),
  });
  return utf8Encoder.encode(json);
}

/** Parses and validates decrypted prompt plaintext; throws {@link InvalidPromptError} on any deviation. */
export function decodePromptPlaintext(plaintext: Uint8Array): Prompt {
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8Decoder.decode(plaintext));
  } catch (error) {
    throw new InvalidPromptError('prompt plaintext is not UTF-8 JSON', { cause: error });
  }
  if (!isRecord(parsed)) throw new InvalidPromptError('prompt plaintext is not a JSON object');
  if (parsed['v'] !== PROMPT_PLAINTEXT_VERSION) {
    throw new InvalidPromptError(`unsupported prompt plaintext version ${JSON.stringify(parsed['v'])}`);
  }
  const { model, messages, replyKey } = parsed;
  if (!Array.isArray(messages)) throw new InvalidPromptError('messages must be an array');
  const checkedMessages = messages.map((message: unknown, index): PromptMessage => {
    if (!isRecord(message)) throw new InvalidPromptError(`messages[${index}] is not an object`);
    const { role, content } = message;
    if (!isPromptRole(role))
      throw new InvalidPromptError(`messages[${index}].role is not one of ${PROMPT_ROLES.join(', ')}`);
    if (typeof content !== 'string')
      throw new InvalidPromptError(`messages[${index}].content is not a string`);
    return { role, content };
  });
  if (typeof replyKey !== 'string') throw new InvalidPromptError('replyKey must be a base64 string');
  const replyKeyBytes = decodeStrictBase64(replyKey);
  checkPromptFields(model, checkedMessages, replyKeyBytes);
  return { model: model as string, messages: checkedMessages, replyKey: replyKeyBytes };
}

function checkPromptFields(model: unknown, messages: readonly PromptMessage[], replyKey: Uint8Array): void {
  if (typeof model !== 'string' || model.length === 0)
    throw new InvalidPromptError('model must be a non-empty string');
  if (messages.length === 0) throw new InvalidPromptError('messages must not be empty');
  for (const [index, message] of messages.entries()) {
    if (!isPromptRole(message.role))
      throw new InvalidPromptError(`messages[${index}].role is not a known role`);
    if (typeof message.content !== 'string')
      throw new InvalidPromptError(`messages[${index}].content is not a string`);
  }
  if (messages[messages.length - 1]!.role !== 'user')
    throw new InvalidPromptError("the last message must be the user's");
  if (replyKey.length !== REPLY_KEY_BYTES) {
    throw new InvalidPromptError(`replyKey must be ${REPLY_KEY_BYTES} bytes, got ${replyKey.length}`);
  }
}

/** Standard padded base64 only: Node's decoder skips junk characters, so re-encode and compare. */
function decodeStrictBase64(text: string): Uint8Array {
  const bytes = Buffer.from(text, 'base64');
  if (bytes.toString('base64') !== text) throw new InvalidPromptError('replyKey is not canonical base64');
  return new Uint8Array(bytes);
}

function isPromptRole(value: unknown): value is PromptRole {
  return typeof value === 'string' && (PROMPT_ROLES as readonly string[]).includes(value);
}
