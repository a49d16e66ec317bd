import { SERVICE_HEADER, type ChatCompletionChunkJson, type ServiceObject } from '@svc/api';
import OpenAI from 'openai';
import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { unreachable } from './api-client.js';
import { EXIT, CliError, apiError } from './errors.js';
import type { Output } from './output.js';

export interface CompletionRequest {
  readonly model: string;
  readonly messages: ChatCompletionMessageParam[];
  readonly conversationId?: string;
}

export interface Answer {
  readonly text: string;
  readonly service: ServiceObject | undefined;
  /** The response headers (`x-service`, `PAYMENT-RESPONSE`). */
  readonly headers: Headers;
}

/**
 * The official OpenAI client pointed at the service's `/v1`. Never retried by the client: a retried call
 * is a new, paid call, so a failure is reported with its remedy instead.
 */
export function openaiClient(
  baseUrl: string,
  auth: { apiKey: string } | { paymentSignature?: string },
): OpenAI {
  return 'apiKey' in auth
    ? new OpenAI({ apiKey: auth.apiKey, baseURL: `${baseUrl}/v1`, maxRetries: 0 })
    : new OpenAI({
        apiKey: 'unused',
        baseURL: `${baseUrl}/v1`,
        maxRetries: 0,
        // A call paid per call carries no Authorization header at all.
        defaultHeaders: {
          authorization: null,
          ...(auth.paymentSignature ? { 'payment-signature': auth.paymentSignature } : {}),
        },
      });
}

/** Streams one completion, writing the text as it comes; the `service` object rides on the chunks. */
export async function streamCompletion(
  client: OpenAI,
  request: CompletionRequest,
  output: Output,
): Promise<Answer> {
  try {
    const { data: stream, response } = await client.chat.completions
      .create({
        model: request.model,
        messages: request.messages,
        stream: true,
        ...(request.conversationId ? { conversation_id: request.conversationId } : {}),
      } as OpenAI.ChatCompletionCreateParamsStreaming)
      .withResponse();
    let text = '';
    let service: ServiceObject | undefined;
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta?.content ?? '';
      text += delta;
      output.write(delta);
      // The service's extension of OpenAI's chunk: the last one carries the `service` object.
      service ??= (chunk as unknown as ChatCompletionChunkJson).service;
    }
    output.write('\n');
    return { text, service: service ?? serviceHeader(response.headers), headers: response.headers };
  } catch (error) {
    throw completionError(error, client.baseURL);
  }
}

/** A refusal of the client as the CLI reports it: the API's status, code, remedy and extra fields. */
export function completionError(error: unknown, baseUrl: string): unknown {
  if (error instanceof OpenAI.APIConnectionError) return unreachable(baseUrl.replace(/\/v1$/, ''), error);
  if (error instanceof OpenAI.APIError) {
    if (error.status === undefined) {
      // An error event after the first chunk: the stream ended without [DONE].
      const failure = apiError(502, { error: error.error }, null);
      return new CliError(`the answer broke off: ${failure.message}`, EXIT.failed, failure.details);
    }
    return apiError(error.status, { error: error.error }, error.headers?.get('retry-after'));
  }
  return error;
}

function serviceHeader(headers: Headers): ServiceObject | undefined {
  const value = headers.get(SERVICE_HEADER);
  return value ? (JSON.parse(value) as ServiceObject) : undefined;
}
