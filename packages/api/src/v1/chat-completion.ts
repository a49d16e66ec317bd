// `/v1` (docs/api.md): the chat completion request as a client sends it (its schema is
// chat-completion-request.ts), and what `/v1` answers: the `service` object, an OpenAI `chat.completion`
// with exactly one choice and no `usage`, the `chat.completion.chunk`s of a stream, and the model list.

/** The roles a message may have. */
export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant'] as const;
export type ChatRole = (typeof CHAT_ROLES)[number];

/** Characters of a `conversation_id`, counted as code points. */
export const MAX_CONVERSATION_ID_LENGTH = 64;

/** A text part of a message's content, as a client sends it. */
export interface TextPartJson {
  readonly type: 'text';
  readonly text: string;
}

/** A message as a client sends it: `content` is a string or a list of text parts. */
export interface ChatMessageJson {
  readonly role: ChatRole;
  readonly content: string | readonly TextPartJson[];
}

/** The body of `POST /v1/chat/completions` as a client sends it (the fields the service reads). */
export interface ChatCompletionRequestJson {
  /** A model id from `GET /v1/models`, verbatim. */
  readonly model: string;
  /** The whole conversation; the last message is the user's. */
  readonly messages: readonly ChatMessageJson[];
  /** True: server-sent events. */
  readonly stream?: boolean;
  /** Extension: prefer the session that last served this conversation. Up to 64 characters. */
  readonly conversation_id?: string;
}

/** The `service` object: the on-chain job that answered. Also sent whole, as JSON, in `x-service`. */
export interface ServiceObject {
  /** The job's id in JobRegistry (a uint256 as a decimal string). */
  readonly job_id: string;
  /** The session the job ran in. */
  readonly session_id: string;
  /** The transaction that submitted the job; on a call paid per call, the settlement. */
  readonly tx_hash: string;
  /** The worker that served the job. */
  readonly worker: string;
  /** Present only when the oldest messages were left out to fit one blob: how many. */
  readonly dropped_messages?: number;
}

/** The `x-service` response header of a completion. */
export const SERVICE_HEADER = 'x-service';

/** An OpenAI `chat.completion` with exactly one choice, no `usage`, plus `service`. */
export interface ChatCompletionJson {
  /** `chatcmpl-...`. */
  readonly id: string;
  readonly object: 'chat.completion';
  /** Unix seconds. */
  readonly created: number;
  readonly model: string;
  readonly choices: readonly [
    {
      readonly index: 0;
      readonly message: { readonly role: 'assistant'; readonly content: string; readonly refusal: null };
      readonly logprobs: null;
      readonly finish_reason: 'stop';
    },
  ];
  readonly service: ServiceObject;
}

/** What one chunk adds: the first carries the role, the others content, the last nothing. */
export interface ChatCompletionDelta {
  readonly role?: 'assistant';
  readonly content?: string;
}

/** One `chat.completion.chunk` of a stream; the last carries `finish_reason` and the `service` object. */
export interface ChatCompletionChunkJson {
  readonly id: string;
  readonly object: 'chat.completion.chunk';
  readonly created: number;
  readonly model: string;
  readonly choices: readonly [
    {
      readonly index: 0;
      readonly delta: ChatCompletionDelta;
      readonly logprobs: null;
      readonly finish_reason: 'stop' | null;
    },
  ];
  readonly service?: ServiceObject;
}

/** A `GET /v1/models` entry: send `id` verbatim as `model` (colons included). */
export interface ModelJson {
  readonly id: string;
  readonly object: 'model';
  /** Unix seconds; 0 when unknown. */
  readonly created: number;
  readonly owned_by: string;
}

/** `GET /v1/models`. */
export interface ModelListJson {
  readonly object: 'list';
  readonly data: readonly ModelJson[];
}
