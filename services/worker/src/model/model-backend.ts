/** One turn of the conversation a prompt carries (docs/protocol.md, Encryption: content is plain text). */
export interface ConversationMessage {
  readonly role: string;
  readonly content: string;
}

export interface GenerationRequest {
  /** The exact model name the prompt asked for (already checked against the session's model). */
  readonly model: string;
  readonly messages: readonly ConversationMessage[];
  /** Aborted when the job can no longer finish in time or the worker drains. */
  readonly signal: AbortSignal;
}

/**
 * What a model produces, in order. `restart` means the model dropped everything it produced so far and
 * starts over: the committed answer is the text after the last restart, while what already streamed
 * stays streamed (the orchestrator detects the divergence). `commit-mismatched-hash` is a test fault
 * only the built-in model emits: the worker then commits a hash that is not its final answer's.
 */
export type GenerationEvent =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'restart' }
  | { readonly kind: 'commit-mismatched-hash' };

/** Every model the worker can serve sits behind this: the built-in deterministic model or an upstream server. */
export interface ModelBackend {
  /** Model names (exact, colons included) this backend answers; their ids go on chain. */
  readonly models: readonly string[];
  generate(request: GenerationRequest): AsyncIterable<GenerationEvent>;
}

/** A model failed to produce an answer; the job is failed on chain so the service can reassign it. */
export class ModelGenerationError extends Error {
  override readonly name = 'ModelGenerationError';
}
