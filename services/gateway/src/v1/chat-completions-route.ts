import { randomUUID } from 'node:crypto';
import { AppError, isAppError, type Logger } from '@svc/platform';
import type { RequestHandler, Response } from 'express';
import { ClientGoneError, drainFor, untilAborted } from './abortable-events.js';
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

/**
 * How long the gateway keeps reading a call whose client left, to hear the backend say its job was not
 * submitted (and give the fee back at once rather than after the reservation's TTL).
 */
const LEFT_CALL_WATCH_MS = 60_000;

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
 * `finally` on every exit, the client leaving mid-stream included. The reservation is committed when the
 * job answered and released only when the backend said no job was submitted, also when it says so after
 * the client left (for up to LEFT_CALL_WATCH_MS). Once the call is handed to the backend, the job may be on
 * chain and paid from the wallet whatever the client does, so a client leaving never gives the fee back
 * (else dropping every connection early would spend without limit). Every other ending is settled by the
 * job's lifecycle events, the reservation's TTL being the last resort.
 */
export function chatCompletionsHandler(ports: ChatCompletionsPorts): RequestHandler {
  const { backend, slots, spend, limitHits, logger } = ports;

  async function run(backendInUse: CompletionBackend, call: CompletionCall): Promise<void> {
    const { callId, key, body, res, clientGone } = call;
    const feeWei = await backendInUse.quoteFee(body.model);
    const reservation = await spend.reserve(key, feeWei, callId);
    if (clientGone.aborted) {
      // Not handed to the backend yet: nothing can be on chain.
      await reservation.release();
      throw new ClientGoneError();
    }
    let answered = false;
    let notSubmitted = false;
    // Also heard after the client left: the backend may only learn then that the job will not be sent.
    const onNotSubmitted = () => {
      notSubmitted = true;
      void reservation.release();
    };
    try {
      const events = untilAborted(
        watchForNotSubmitted(
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
          onNotSubmitted,
        ),
        clientGone,
        drainFor(LEFT_CALL_WATCH_MS),
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
      // The one settlement, awaited; release() after a release is that same release.
      if (notSubmitted) await reservation.release();
      else if (!answered)
        logger.info(
          { keyPrefix: key.prefix, callId, reservationId: reservation.reservationId },
          "the call ended before its job's outcome: the backend's word or the job's lifecycle events settle the spend reservation",
        );
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
        limitHits.report(key.keyId, 'concurrency');
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
      // The orchestrator refused to open another session: counted in the key's `limitHits.sessionOpens`.
      if (isAppError(error) && error.code === 'session_open_limit_exceeded')
        limitHits.report(key.keyId, 'sessionOpens');
      if (!(error instanceof ClientGoneError) && !clientGone.signal.aborted) throw error;
      logger.info({ keyPrefix: key.prefix, callId }, 'client left before its completion ended');
    } finally {
      res.off('close', onClose);
      await slot.release();
    }
  };
}

/** Passes the events through, telling `onNotSubmitted` when the backend fails a call it never submitted. */
async function* watchForNotSubmitted(
  events: AsyncIterable<CompletionEvent>,
  onNotSubmitted: () => void,
): AsyncGenerator<CompletionEvent> {
  for await (const event of events) {
    if (event.kind === 'failed' && !event.jobSubmitted) onNotSubmitted();
    yield event;
  }
}
