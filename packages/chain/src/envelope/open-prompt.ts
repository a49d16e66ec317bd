import { decryptPrompt, type PromptBinding } from './prompt-cipher.js';
import { decodePromptPlaintext, type Prompt } from './prompt-plaintext.js';
import type { SessionKeyPair } from './session-key.js';

/**
 * The worker's step from blob payload to prompt: decrypt, then validate the v1 plaintext. Throws
 * {@link EnvelopeDecryptionError} or {@link InvalidPromptError}. Checking `model` against the
 * session's model is the worker's rule, left to it.
 */
export function openPrompt(wire: Uint8Array, sessionKeyPair: SessionKeyPair, binding: PromptBinding): Prompt {
  return decodePromptPlaintext(decryptPrompt(wire, sessionKeyPair, binding));
}
