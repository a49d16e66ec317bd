import { SERVICE_HEADER, streamErrorEvent } from '@svc/api';
import type { Response } from 'express';
import { ClientGoneError } from './abortable-events.js';
import type { CompletionEvent, ServiceInfo } from './completion-backend.js';
import {
  chatCompletionChunkJson,
  chatCompletionJson,
  serviceHeader,
  type CompletionIdentity,
} from './openai-shapes.js';
import type { SseWriter } from './sse-writer.js';
import { toStreamError } from './v1-errors.js';

/** Called with the fee charged once the job answered, before the answer's last byte goes out. */
export type OnAnswered = (chargedWei: bigint) => Promise<void>;

/**
 * Headers a 200 carries beside `x-service`, from the job that answered and its fee (the `started` event's,
 * else the fee charged): the `PAYMENT-RESPONSE` of a call paid per call.
 */
export type AnswerHeaders = (service: ServiceInfo, feeWei: bigint) => Record<string, string>;

const NO_HEADERS: AnswerHeaders = () => ({});

function endedWithoutOutcome(): Error {
  return new Error('the completion backend ended the call without completing or failing it');
}

/** A non-streamed call: one `chat.completion` once the job completed; any failure is an ordinary HTTP error. */
export async function answerWithJson(
  events: AsyncIterable<CompletionEvent>,
  res: Response,
  identity: CompletionIdentity,
  onAnswered: OnAnswered,
  answerHeaders: AnswerHeaders = NO_HEADERS,
): Promise<void> {
  let startedFeeWei: bigint | undefined;
  for await (const event of events) {
    if (event.case === 'failed') throw event.error;
    if (event.case === 'started') startedFeeWei = event.feeWei;
    if (event.case !== 'completed') continue;
    await onAnswered(event.chargedWei);
    res
      .status(200)
      .set({
        [SERVICE_HEADER]: serviceHeader(event.service),
        ...answerHeaders(event.service, startedFeeWei ?? event.chargedWei),
      })
      .json(chatCompletionJson(identity, event.text, event.service));
    return;
  }
  throw endedWithoutOutcome();
}

/**
 * A streamed call. Status and headers (`x-service` and the answer headers included) go out with the first
 * chunk, when the job starts; a failure before it is thrown as an ordinary HTTP error, one after it ends
 * the stream with an error event carrying its `code` (job_failed, stream_diverged) in place of `[DONE]`,
 * and is rethrown.
 */
export async function relayAsEvents(
  events: AsyncIterable<CompletionEvent>,
  sse: SseWriter,
  identity: CompletionIdentity,
  onAnswered: OnAnswered,
  answerHeaders: AnswerHeaders = NO_HEADERS,
): Promise<void> {
  let opened = false;
  const open = async (service: ServiceInfo, feeWei: bigint) => {
    if (opened) return;
    opened = true;
    sse.open({ [SERVICE_HEADER]: serviceHeader(service), ...answerHeaders(service, feeWei) });
    await sse.data(chatCompletionChunkJson(identity, { role: 'assistant', content: '' }));
  };
  try {
    for await (const event of events) {
      switch (event.case) {
        case 'started':
          await open(event.service, event.feeWei);
          break;
        case 'delta':
          if (!opened) throw new Error('the completion backend sent a delta before the job started');
          await sse.data(chatCompletionChunkJson(identity, { content: event.text }));
          break;
        case 'completed':
          await open(event.service, event.chargedWei);
          await onAnswered(event.chargedWei);
          await sse.data(chatCompletionChunkJson(identity, {}, { service: event.service }));
          await sse.done();
          return;
        case 'failed':
          throw event.error;
      }
    }
    throw endedWithoutOutcome();
  } catch (error) {
    if (opened && !(error instanceof ClientGoneError)) await sse.fail(streamErrorEvent(toStreamError(error)));
    throw error;
  }
}
