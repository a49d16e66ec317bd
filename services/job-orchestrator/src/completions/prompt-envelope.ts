import {
  MAX_PROMPT_PLAINTEXT_BYTES,
  encodePromptPlaintext,
  encryptPrompt,
  generateReplyKey,
  type PromptBinding,
  type PromptMessage,
} from '@svc/chain';
import { AppError } from '@svc/platform';

/** A prompt ready to be encrypted to a session: its plaintext, the reply key inside it, what was left out. */
export interface PreparedPrompt {
  readonly plaintext: Uint8Array;
  readonly replyKey: Uint8Array;
  /** How many of the oldest non-system messages were left out so the encrypted prompt fits one blob. */
  readonly droppedMessages: number;
}

const utf8 = new TextEncoder();

/** Roles kept whatever the length: the application's instructions. */
function isInstruction(message: PromptMessage): boolean {
  return message.role === 'system' || message.role === 'developer';
}

/**
 * The prompt plaintext of docs/protocol.md with a fresh reply key, dropping the oldest messages that are
 * neither instructions nor the last turn until it fits one blob once encrypted. When the instructions and
 * the last turn alone are too long, the call is `context_length_exceeded`.
 *
 * Sizes are counted per message (each message's JSON plus its comma), so dropping is linear in the
 * history; the final plaintext is encoded once and checked against the same limit.
 */
export function preparePrompt(
  model: string,
  messages: readonly PromptMessage[],
  limitBytes = MAX_PROMPT_PLAINTEXT_BYTES,
): PreparedPrompt {
  const replyKey = generateReplyKey();
  const empty = encodePromptPlaintext({ model, messages: [{ role: 'user', content: '' }], replyKey });
  // `empty` holds one message of a known size; the rest of it is the fixed part of every prompt.
  const fixedBytes = empty.length - messageBytes({ role: 'user', content: '' });
  const sizes = messages.map(messageBytes);
  // n messages take their sizes plus n - 1 commas.
  let total = fixedBytes + sizes.reduce((sum, size) => sum + size, 0) + Math.max(messages.length - 1, 0);
  const keep = messages.map(() => true);
  let dropped = 0;
  for (let index = 0; total > limitBytes && index < messages.length - 1; index++) {
    if (isInstruction(messages[index]!)) continue;
    keep[index] = false;
    total -= sizes[index]! + 1;
    dropped += 1;
  }
  if (total > limitBytes) {
    throw new AppError('context_length_exceeded', {
      message: `The system messages and the last message alone take ${total} bytes; one encrypted prompt holds at most ${limitBytes}.`,
    });
  }
  const kept = messages.filter((_, index) => keep[index]);
  const plaintext = encodePromptPlaintext({ model, messages: kept, replyKey });
  if (plaintext.length !== total) {
    // The size arithmetic mirrors encodePromptPlaintext; a mismatch is a bug, never a silent overflow.
    throw new Error(`prompt size mismatch: counted ${total}, encoded ${plaintext.length}`);
  }
  return { plaintext, replyKey, droppedMessages: dropped };
}

function messageBytes(message: PromptMessage): number {
  return utf8.encode(JSON.stringify({ role: message.role, content: message.content })).length;
}

/** The prompt wire for one session (docs/protocol.md, Prompt wire): what the job's blob carries. */
export function sealPrompt(
  prepared: PreparedPrompt,
  sessionPublicKey: Uint8Array,
  binding: PromptBinding,
): Uint8Array {
  return encryptPrompt(prepared.plaintext, sessionPublicKey, binding);
}
