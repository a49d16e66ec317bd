import { createHash } from 'node:crypto';
import type { ConversationMessage } from './model-backend.js';

/**
 * The built-in model's answer: a pure function of the conversation, so tests (and a second
 * implementation) can assert the exact text. It echoes the last user message and fingerprints the
 * whole conversation, so two conversations ending in the same question still get different answers.
 */
export function deterministicAnswer(messages: readonly ConversationMessage[]): string {
  const lastUser = [...messages].reverse().find((message) => message.role === 'user');
  return `You said: ${lastUser?.content ?? ''} [conversation ${conversationFingerprint(messages)}]`;
}

/** The different text a restarting model answers with after its first chunks went out. */
export function restartedDeterministicAnswer(messages: readonly ConversationMessage[]): string {
  return `Let me start over. ${deterministicAnswer(messages)}`;
}

export function conversationFingerprint(messages: readonly ConversationMessage[]): string {
  const canonical = JSON.stringify(messages.map(({ role, content }) => [role, content]));
  return createHash('sha256').update(canonical).digest('hex').slice(0, 16);
}

/**
 * Splits text into the tokens the built-in model emits one at a time: each word with the whitespace
 * before it, so concatenating the tokens gives back the text exactly.
 */
export function tokenize(text: string): string[] {
  return text.match(/\s*\S+|\s+$/g) ?? [];
}
