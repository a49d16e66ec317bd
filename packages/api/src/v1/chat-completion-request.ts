import { z } from 'zod';
import { CHAT_ROLES, MAX_CONVERSATION_ID_LENGTH } from './chat-completion.js';

// `POST /v1/chat/completions` (docs/api.md, Chat completion request body). The body is read in the order a
// caller fixes it, and only the first problem is answered, as OpenAI does: the body, `model`, `messages`
// (each message: its role, no tools, its content, part by part; then the last message's role), the tools
// fields, `stream`, `conversation_id`. Other OpenAI fields (temperature, max_tokens, top_p, ...) are
// accepted and ignored.

/** Text parts of one message are joined into the one string a job carries. */
const TEXT_PART_SEPARATOR = '\n';

const TOOLS_UNSUPPORTED = 'Tools and function calling are not supported.';

function isPresent(value: unknown): boolean {
  return value !== undefined && value !== null;
}

/** The field an issue is about, as OpenAI names it in `param`: `messages[0].content[1].text`. */
function paramOf(path: readonly PropertyKey[]): string {
  if (path.length === 0) return 'body';
  return path
    .map((key, index) => (typeof key === 'number' ? `[${key}]` : `${index === 0 ? '' : '.'}${String(key)}`))
    .join('');
}

/** A message's role: one of four; `tool` and `function` are named as the tools they are. */
const role = z.enum(CHAT_ROLES, {
  error: (issue) => {
    const param = paramOf(issue.path ?? []);
    if (issue.input === undefined) return `${param} is required.`;
    if (issue.input === 'tool' || issue.input === 'function')
      return `Role "${issue.input}" is not supported: tools and function calling are not.`;
    return `${param} ${JSON.stringify(issue.input)} is not supported; use system, developer, user or assistant.`;
  },
});

const IMAGE_PART_TYPES: ReadonlySet<unknown> = new Set(['image_url', 'input_image']);
const partShape = (issue: { path?: PropertyKey[] }) =>
  `${paramOf(issue.path ?? [])} must be a content part object with a type.`;

/** One part of a list content: a text part, its problems (but its text's) answered against the part. */
const textPart = z
  .looseObject({}, { error: partShape })
  .refine((part) => typeof part.type === 'string', { error: partShape, abort: true })
  .refine((part) => !IMAGE_PART_TYPES.has(part.type), {
    error: 'Image content parts are not supported; send text only.',
    abort: true,
  })
  .refine((part) => part.type === 'text', {
    error: (issue) =>
      `Content part type "${String((issue.input as { type?: unknown }).type)}" is not supported; send text parts only.`,
    abort: true,
  })
  .pipe(
    z.object({
      type: z.literal('text'),
      text: z.string({ error: (issue) => `${paramOf(issue.path ?? [])} must be a string.` }),
    }),
  );

/** A message's content: a string (one text part), or a list of text parts joined into one string. */
const content = z.preprocess(
  (value) => (typeof value === 'string' ? [{ type: 'text', text: value }] : value),
  z
    .array(textPart, {
      error: (issue) => `${paramOf(issue.path ?? [])} must be a string or a list of text parts.`,
    })
    .transform((parts) => parts.map((part) => part.text).join(TEXT_PART_SEPARATOR)),
);

/** One message: its role first, then no tool calls (answered against the message), then its content. */
const message = z
  .looseObject(
    { role },
    { error: (issue) => `${paramOf(issue.path ?? [])} must be an object with a role and content.` },
  )
  .refine((value) => !isPresent(value.tool_calls) && !isPresent(value.function_call), {
    error: TOOLS_UNSUPPORTED,
    abort: true,
  })
  .pipe(z.object({ role, content }));

const messages = z
  .array(message, {
    error: (issue) =>
      isPresent(issue.input) ? 'messages must be a list of messages.' : 'messages is required.',
  })
  .min(1, { error: 'messages must hold at least one message.', abort: true })
  .superRefine((list, context) => {
    if (list.at(-1)?.role !== 'user')
      context.addIssue({
        code: 'custom',
        message: "The last message must be the user's.",
        path: [list.length - 1, 'role'],
        input: list,
      });
  });

const MODEL_ID = 'model must be a model id from GET /v1/models.';

/** Tool definitions: absent, null or an empty list (no tools) only. */
const noTools = z.tuple([], { error: TOOLS_UNSUPPORTED }).nullish();
/** A tool choice: absent, null or `none` only. */
const noToolChoice = z.literal('none', { error: TOOLS_UNSUPPORTED }).nullish();

/**
 * The schema of a `POST /v1/chat/completions` body. Its output is the call as the service runs it: text
 * parts joined, `stream` a boolean, an empty `conversation_id` none.
 */
export const chatCompletionRequestSchema = z
  .looseObject(
    {
      model: z
        .string({
          error: (issue) =>
            isPresent(issue.input) ? MODEL_ID : 'model is required: an id from GET /v1/models.',
        })
        .min(1, MODEL_ID),
      messages,
      tools: noTools,
      functions: noTools,
      tool_choice: noToolChoice,
      function_call: noToolChoice,
      stream: z.boolean({ error: 'stream must be a boolean.' }).nullish(),
      conversation_id: z
        .string({ error: 'conversation_id must be a string.' })
        // Characters as docs/api.md counts them: code points, not UTF-16 units.
        .refine((id) => [...id].length <= MAX_CONVERSATION_ID_LENGTH, {
          error: `conversation_id must be at most ${MAX_CONVERSATION_ID_LENGTH} characters.`,
        })
        .nullish(),
    },
    { error: 'The body must be a JSON object.' },
  )
  .transform(({ model, messages, stream, conversation_id }) => ({
    model,
    messages,
    stream: stream === true,
    conversationId: conversation_id || undefined,
  }));

/** A chat completion call as the service runs it: the body read by `chatCompletionRequestSchema`. */
export type ChatCompletionRequest = z.output<typeof chatCompletionRequestSchema>;

/** One message as a job carries it: text parts already joined. */
export type ChatMessage = ChatCompletionRequest['messages'][number];

export type ReadChatCompletionRequest =
  | { readonly ok: true; readonly request: ChatCompletionRequest }
  | {
      readonly ok: false;
      /** The field at fault, as OpenAI names it: `model`, `messages[0].content[1].text`, `body`. */
      readonly param: string;
      readonly message: string;
    };

/**
 * Reads a `POST /v1/chat/completions` body; a body that is not taken is answered `400` (code null) with the
 * first problem's `message` and its `param`, the field at fault.
 */
export function readChatCompletionRequest(body: unknown): ReadChatCompletionRequest {
  const parsed = chatCompletionRequestSchema.safeParse(body);
  if (parsed.success) return { ok: true, request: parsed.data };
  // Issues come in the order the body is read: the first is the one to answer.
  const [first] = parsed.error.issues;
  return { ok: false, param: paramOf(first?.path ?? []), message: first?.message ?? 'Invalid request.' };
}
