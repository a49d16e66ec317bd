import { randomUUID } from 'node:crypto';
import { AppError, isAppError, type Logger } from '@svc/platform';
import type { RequestHandler, Response } from 'express';
import { ClientGoneError, untilAborted } from './abortable-events.js';
import { authenticatedKey } from './api-key-auth.js';
import type { CallSlot, CallSlots } from './call-slots.js';
import { parseChatCompletionBody, type ChatCompletionBody } from './chat-request.js';
import type { CompletionBackend, CompletionEvent } from './completion-backend.js';
import { answerWithJson, relayAsEvents } from './completion-relay.js';
import type { ResolvedApiKey } from './key-resolution-cache.js';
import type { LimitHitReporter } from './limit-hit-reporter.js';
import type { SpendReservations } from './spend-reservations.js';
import { SseWriter } from './sse-writer.js';

export interface ChatCompletionsPorts {
  /** Undefined on a server with no chain, signer or worker link: completions answer 503 `not_configured`. */
  readonly backend: CompletionBackend | undefined;
  readonly slots: CallSlots;
  readonly spend: SpendReservations;
  readonly limitHits: LimitHitReporter;
  readonly logger: Logger;
}

interface CompletionCall {
  readonly callId: string;
  readonly key: ResolvedApiKey;
  readonly body: ChatCompletionBody;
  readonly res: Response;
  /** Aborts when the client goes away. */
  readonly clientGone: AbortSignal;
}

/**
 * `POST /v1/chat/completions` after authentication and the rate limit: validation, then the call holds an
 * in-flight slot and a spend reservation while the backend runs the job. The slot is released in one
 * `finally` on every exit, the client leaving mid-stream included; the reservation is committed when the
 * job answered, released when the call failed or the client left before the job was submitted, and left to
 * the job's lifecycle events when the client left a submitted job.
 */
export function chatCompletionsHandler(ports: ChatCompletionsPorts): RequestHandler {
  const { backend, slots, spend, limitHits, logger } = ports;

  async function run(backendInUse: CompletionBackend, call: CompletionCall): Promise<void> {
    const { callId, key, body, res, clientGone } = call;
    const feeWei = await backendInUse.quoteFee(body.model);
    const reservation = await spend.reserve(key, feeWei, callId);
    // Once the job is on chain (`started`) the wallet pays for it whether or not the client stays, so a
    // client that leaves must not give the fee back to the cap (else dropping every connection after the
    // first chunk would spend without limit): the job's lifecycle events settle it (answered commits,
    // failed or refunded releases), the reservation's TTL being the last resort.
    let jobSubmitted = false;
    let answered = false;
    try {
      const events = untilAborted(
        observeSubmission(
          backendInUse.runCompletion(
            {
              callId,
              model: body.model,
              messages: body.messages,
              conversationId: body.conversationId,
              stream: body.stream,
              payment: {
                kind: 'delegate',
                wallet: key.wallet,
                keyId: key.keyId,
                reservationId: reservation.reservationId,
                maxFeeWei: feeWei,
              },
            },
            clientGone,
          ),
          () => {
            jobSubmitted = true;
          },
        ),
        clientGone,
      );
      const identity = {
        id: `chatcmpl-${callId.replaceAll('-', '')}`,
        created: Math.floor(Date.now() / 1000),
        model: body.model,
      };
      const onAnswered = async (chargedWei: bigint) => {
        answered = true;
        await reservation.commit(chargedWei);
      };
      if (body.stream) await relayAsEvents(events, new SseWriter(res, clientGone), identity, onAnswered);
      else await answerWithJson(events, res, identity, onAnswered);
    } finally {
      const leftWhileJobRuns = jobSubmitted && clientGone.aborted;
      if (!answered && !leftWhileJobRuns) await reservation.release();
    }
  }

  return async (req, res) => {
    const key = authenticatedKey(res);
    const body = parseChatCompletionBody(req.body);
    if (backend === undefined)
      throw new AppError('not_configured', {
        message: 'Completions are off on this server: it has no chain, signer or worker link configured.',
      });
    const callId = randomUUID();
    let slot: CallSlot;
    try {
      slot = await slots.acquire(key.keyId);
    } catch (error) {
      if (isAppError(error) && error.code === 'concurrency_limit_exceeded')
        limitHits.report(key.keyId, 'concurrency', callId);
      throw error;
    }
    const clientGone = new AbortController();
    const onClose = () => {
      if (!res.writableFinished) clientGone.abort();
    };
    res.once('close', onClose);
    try {
      await run(backend, { callId, key, body, res, clientGone: clientGone.signal });
    } catch (error) {
      if (!(error instanceof ClientGoneError) && !clientGone.signal.aborted) throw error;
      logger.info({ keyPrefix: key.prefix, callId }, 'client left before its completion ended');
    } finally {
      res.off('close', onClose);
      await slot.release();
    }
  };
}

/** Passes the events through, telling `onSubmitted` when the job is on chain (`started`). */
async function* observeSubmission(
  events: AsyncIterable<CompletionEvent>,
  onSubmitted: () => void,
): AsyncGenerator<CompletionEvent> {
  for await (const event of events) {
    if (event.kind === 'started') onSubmitted();
    yield event;
  }
}
