import type OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { completionError, openaiClient, streamCompletion } from '../completion.js';
import type { CommandContext } from '../context.js';
import { EXIT, CliError, usageError } from '../errors.js';

export interface ChatOptions {
  readonly model?: string;
  readonly system?: string;
  readonly conversation?: string;
  readonly verbose?: boolean;
  readonly apiKey?: string;
}

/**
 * The API key: --api-key, else SVC_API_KEY, else the one `svc keys create --save` kept for the wallet
 * (then its id is known too).
 */
function apiKeyOf(context: CommandContext, options: { apiKey?: string }): { key: string; savedId?: string } {
  const given = options.apiKey ?? context.env.SVC_API_KEY;
  if (given) return { key: given };
  const saved = context.credentials.savedKey(context.baseUrl, context.namedWallet);
  if (!saved)
    throw new CliError(`no API key for ${context.baseUrl}`, EXIT.credentials, {
      code: 'invalid_api_key',
      remedy: 'Pass --api-key or set SVC_API_KEY',
      command: 'svc keys create --save',
    });
  return { key: saved.key, savedId: saved.id };
}

/** The message: the arguments joined, else standard input when it is not a terminal. */
export async function messageOf(words: readonly string[]): Promise<string> {
  if (words.length > 0) return words.join(' ');
  if (process.stdin.isTTY) throw usageError('nothing to send: give a message, or pipe one in');
  let text = '';
  process.stdin.setEncoding('utf8'); // whole characters, even across chunk boundaries
  for await (const chunk of process.stdin) text += chunk as string;
  if (!text.trim()) throw usageError('nothing to send: the input was empty');
  return text;
}

export function messagesOf(message: string, system: string | undefined): ChatCompletionMessageParam[] {
  return [
    ...(system ? [{ role: 'system' as const, content: system }] : []),
    { role: 'user', content: message },
  ];
}

/** The model: --model, else the first the service lists. */
export async function modelOf(client: OpenAI, model: string | undefined): Promise<string> {
  if (model) return model;
  try {
    const first = (await client.models.list()).data[0]?.id;
    if (!first)
      throw new CliError('no model is served right now', EXIT.failed, {
        code: 'model_not_found',
        remedy: 'Retry shortly',
      });
    return first;
  } catch (error) {
    throw completionError(error, client.baseURL);
  }
}

/** `svc chat`: one streamed completion with an API key, printed as it comes. */
export async function chat(
  context: CommandContext,
  words: readonly string[],
  options: ChatOptions,
): Promise<void> {
  const { key, savedId } = apiKeyOf(context, options);
  const client = openaiClient(context.baseUrl, { apiKey: key });
  const message = await messageOf(words);
  const model = await modelOf(client, options.model);
  const request = {
    model,
    messages: messagesOf(message, options.system),
    ...(options.conversation ? { conversationId: options.conversation } : {}),
  };
  const answer = await streamCompletion(client, request, context.output).catch((error: unknown) => {
    // The saved key's id is known: the remedy's command can name it.
    if (savedId && error instanceof CliError && error.details.code === 'spend_cap_exceeded')
      throw new CliError(error.message, error.exitCode, {
        ...error.details,
        command: `svc keys cap ${savedId} <amount|none>`,
      });
    throw error;
  });
  context.output.result({ model, text: answer.text, service: answer.service }, () =>
    options.verbose ? `service ${JSON.stringify(answer.service, null, 2)}` : '',
  );
}

/** `svc models`: the models at least one worker serves now. */
export async function models(context: CommandContext, options: { apiKey?: string }): Promise<void> {
  const client = openaiClient(context.baseUrl, { apiKey: apiKeyOf(context, options).key });
  try {
    const ids = (await client.models.list()).data.map((model) => model.id);
    context.output.result(ids, () => ids.join('\n'));
  } catch (error) {
    throw completionError(error, client.baseURL);
  }
}
