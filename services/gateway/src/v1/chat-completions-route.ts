import { randomUUID } from 'node:crypto';
import type { ChatCompletionRequest } from '@svc/api';
import { AppError, isAppError, type Logger } from '@svc/platform';
import { PAYMENT_SIGNATURE_HEADER } from '@svc/x402';
import type { RequestHandler, Response } from 'express';
import { clientNetwork } from '../http/client-address.js';
import type { CallSlot, CallSlots } from '../limits/call-slots.js';
import { ClientGoneError, drainFor, untilAborted } from './abortable-events.js';
import { authenticatedKey, presentedApiKey } from './api-key-auth.js';
import { parseChatCompletionBody } from './chat-request.js';
import type { CompletionBackend, CompletionEvent, CompletionPayment } from './completion-backend.js';
import { answerWithJson, relayAsEvents, type AnswerHeaders } from './completion-relay.js';
import type { ResolvedApiKey } from './key-resolution-cache.js';
import type { LimitHitReporter } from './limit-hit-reporter.js';
import type { PaymentReservation } from './per-call/payment-reservation.js';
import type { PerCallPayments } from './per-call/per-call-payments.js';
import type { SpendReservation, SpendReservations } from './spend-reservations.js';
import { SseWriter } from './sse-writer.js';

export interface ChatCompletionsPorts {
  /** Undefined on a server with no chain, signer or worker link: completions answer 503 `not_configured`. */
  readonly backend: CompletionBackend | undefined;
  /** In-flight slots of API keys. */
  readonly slots: CallSlots;
  readonly spend: SpendReservations;
  readonly limitHits: LimitHitReporter;
  /** Per-call payments (x402 `prepaid-debit`); undefined on a server that takes none. */
  readonly perCall: PerCallPayments | undefined;
  readonly logger: Logger;
}

/**
 * How long the gateway keeps reading a call whose client left, to hear the backend say its job was not
 * submitted (and give the fee back at once rather than after the reservation's TTL).
 */
const LEFT_CALL_WATCH_MS = 60_000;

/** A call past validation: an API key, a verified per-call payment, or both. */
interface CompletionCall {
  readonly callId: string;
  readonly body: ChatCompletionRequest;
  readonly res: Response;
  readonly key: ResolvedApiKey | undefined;
  readonly payment: PaymentReservation | undefined;
}

/** What a call holds while its job runs, each given back or kept by how the call ends. */
interface CallHolds {
  /** How the job is paid, as the backend takes it. */
  readonly payment: CompletionPayment;
  /** The job answered, at this fee. */
  answered(chargedWei: bigint): Promise<void>;
  /** The backend's word that no job was (or will be) submitted: everything goes back. Idempotent. */
  notSubmitted(): Promise<void>;
  readonly answerHeaders: AnswerHeaders;
}

/**
 * `POST /v1/chat/completions` after authentication and the key's rate limit: validation, then the call
 * holds an in-flight slot and its reservations while the backend runs the job. A call is paid by its API
 * key's wallet (the delegate path), or per call by a verified `PAYMENT-SIGNATURE` (with or without a key
 * beside it; docs/protocol.md). The slot is released in one `finally` on every exit, the client leaving
 * mid-stream included. Until the call is handed to the backend, any refusal gives everything back. After
 * that, the key's spend reservation is committed when the job answered, and it and the payment's nonce are
 * released only when the backend said no job was submitted, also when it says so after the client left (for
 * up to LEFT_CALL_WATCH_MS). Once handed over, the job may be on chain and paid whatever the client does,
 * so a client leaving never gives the fee back (else dropping every connection early would spend without
 * limit). Every other ending is settled by the job's lifecycle events, the reservations' TTLs being the
 * last resort.
 */
export function chatCompletionsHandler(ports: ChatCompletionsPorts): RequestHandler {
  const { backend, slots, spend, limitHits, perCall, logger } = ports;

  /**
   * Admits the call to an in-flight slot: its key's (the wallet of which must pay a payment sent beside
   * it), or on a keyless call the payer's, after the payer's rate.
   */
  async function admit(call: CompletionCall): Promise<CallSlot> {
    const { key, payment, res } = call;
    if (key === undefined) {
      if (payment === undefined || perCall === undefined)
        throw new Error('a call with neither key nor payment');
      return perCall.payerLimits.take(payment.payment.payer, res);
    }
    const foreignPayer = payment && perCall?.foreignPayer(payment.payment, key);
    if (foreignPayer) throw foreignPayer;
    // A refusal is counted in the key's `limitHits.concurrency` (see v1Limits).
    return slots.acquire(key.keyId);
  }

  /** Reserves the fee against the key's cap (every call made with a key, paid per call or not). */
  async function holdsFor(backendInUse: CompletionBackend, call: CompletionCall): Promise<CallHolds> {
    const { callId, body, key, payment } = call;
    const reservation =
      key === undefined
        ? undefined
        : await spend.reserve(key, await backendInUse.quoteFee(body.model), callId);
    if (payment === undefined) {
      if (key === undefined || reservation === undefined) throw new Error('a delegate call without a key');
      return {
        payment: {
          case: 'delegate',
          wallet: key.wallet,
          keyId: key.keyId,
          reservationId: reservation.reservationId,
          maxFeeWei: reservation.amountWei,
        },
        answered: (chargedWei) => reservation.commit(chargedWei),
        notSubmitted: () => reservation.release(),
        answerHeaders: () => ({}),
      };
    }
    return prepaidDebitHolds(payment, key, reservation);
  }

  function prepaidDebitHolds(
    payment: PaymentReservation,
    key: ResolvedApiKey | undefined,
    reservation: SpendReservation | undefined,
  ): CallHolds {
    if (perCall === undefined) throw new Error('a per-call payment on a server that takes none');
    const { reservationId, payer, amountWei } = payment.payment;
    return {
      payment: {
        case: 'prepaidDebit',
        paymentReservationId: reservationId,
        payer,
        amountWei,
        ...(key && reservation ? { keyId: key.keyId, spendReservationId: reservation.reservationId } : {}),
      },
      answered: async (chargedWei) => {
        await reservation?.commit(chargedWei);
      },
      notSubmitted: async () => {
        await Promise.all([payment.release(), reservation?.release()]);
      },
      answerHeaders: perCall.answerHeaders(payment.payment),
    };
  }

  async function run(
    backendInUse: CompletionBackend,
    call: CompletionCall,
    holds: CallHolds,
    clientGone: AbortSignal,
  ): Promise<void> {
    const { callId, body, res } = call;
    if (clientGone.aborted) {
      // Not handed to the backend yet: nothing can be on chain.
      await holds.notSubmitted();
      throw new ClientGoneError();
    }
    let answered = false;
    let notSubmitted = false;
    // Also heard after the client left: the backend may only learn then that the job will not be sent.
    const onNotSubmitted = () => {
      notSubmitted = true;
      void holds.notSubmitted();
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
              payment: holds.payment,
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
        await holds.answered(chargedWei);
      };
      if (body.stream)
        await relayAsEvents(
          events,
          new SseWriter(res, clientGone),
          identity,
          onAnswered,
          holds.answerHeaders,
        );
      else await answerWithJson(events, res, identity, onAnswered, holds.answerHeaders);
    } finally {
      // The one settlement, awaited; a release after a release is that same release.
      if (notSubmitted) await holds.notSubmitted();
      else if (!answered)
        logger.info(
          { keyPrefix: call.key?.prefix, callId, payment: reservationIds(holds.payment) },
          "the call ended before its job's outcome: the backend's word or the job's lifecycle events settle its reservations",
        );
    }
  }

  async function serve(backendInUse: CompletionBackend, call: CompletionCall): Promise<void> {
    const { key, payment, res } = call;
    const clientGone = new AbortController();
    const onClose = () => {
      if (!res.writableFinished) clientGone.abort();
    };
    res.once('close', onClose);
    let slot: CallSlot | undefined;
    try {
      let holds: CallHolds;
      try {
        slot = await admit(call);
        holds = await holdsFor(backendInUse, call);
      } catch (error) {
        // Refused before the backend saw the call: the same payment can be sent again.
        await payment?.release();
        throw error;
      }
      await run(backendInUse, call, holds, clientGone.signal);
    } catch (error) {
      // The orchestrator refused to open another session: counted in the key's `limitHits.sessionOpens`.
      if (key && isAppError(error) && error.code === 'session_open_limit_exceeded')
        await limitHits.report(key.keyId, 'sessionOpens');
      if (!(error instanceof ClientGoneError) && !clientGone.signal.aborted) throw error;
      logger.info({ keyPrefix: key?.prefix, callId: call.callId }, 'client left before its completion ended');
    } finally {
      res.off('close', onClose);
      await slot?.release();
    }
  }

  return async (req, res) => {
    const body = parseChatCompletionBody(req.body);
    if (backend === undefined)
      throw new AppError('not_configured', {
        message: 'Completions are off on this server: it has no chain, signer or worker link configured.',
      });
    const callId = randomUUID();
    if (perCall === undefined) {
      await serve(backend, { callId, body, res, key: authenticatedKey(res), payment: undefined });
      return;
    }
    const key = presentedApiKey(res);
    // A keyless call costs the settler chain reads whatever it carries: its address is limited first.
    if (key === undefined) await perCall.payerLimits.countKeyless(clientNetwork(req), res);
    const resource = perCall.resourceOf(req, body);
    const paymentSignature = req.get(PAYMENT_SIGNATURE_HEADER);
    if (paymentSignature === undefined && key === undefined) throw await perCall.paymentRequired(resource);
    const payment =
      paymentSignature === undefined ? undefined : await perCall.verify(paymentSignature, resource, callId);
    try {
      await serve(backend, { callId, body, res, key, payment });
    } catch (error) {
      // Before the first byte only: a stream that failed after it already ended with its error event.
      throw res.headersSent ? error : await perCall.explainFailure(error, resource, payment?.payment);
    }
  };
}

/** Passes the events through, telling `onNotSubmitted` when the backend fails a call it never submitted. */
async function* watchForNotSubmitted(
  events: AsyncIterable<CompletionEvent>,
  onNotSubmitted: () => void,
): AsyncGenerator<CompletionEvent> {
  for await (const event of events) {
    if (event.case === 'failed' && !event.jobSubmitted) onNotSubmitted();
    yield event;
  }
}

/** The reservations a call holds, for the log. */
function reservationIds(payment: CompletionPayment): Record<string, string | undefined> {
  return payment.case === 'delegate'
    ? { spendReservationId: payment.reservationId }
    : { paymentReservationId: payment.paymentReservationId, spendReservationId: payment.spendReservationId };
}
