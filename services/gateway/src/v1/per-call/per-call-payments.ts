import type { ChatCompletionRequest } from '@svc/api';
import { AppError, isAppError, isPaymentRefusalCode, type ErrorFields, type Logger } from '@svc/platform';
import type { PaymentResource, PrepaidDebitRequirements } from '@svc/x402';
import type { Request } from 'express';
import type { PayerLimits } from '../../limits/payer-limits.js';
import type { AnswerHeaders } from '../completion-relay.js';
import type { ResolvedApiKey } from '../key-resolution-cache.js';
import { paymentRefusedHeader, paymentRequiredHeader, paymentSettledHeader } from './payment-headers.js';
import { paymentReservation, type PaymentReservation } from './payment-reservation.js';
import type { PaymentOffer, PaymentSettlerPort, VerifiedPayment } from './payment-settler-port.js';

const CHAT_COMPLETIONS_PATH = '/v1/chat/completions';
const RESOURCE_DESCRIPTION = 'One chat completion, answered by a worker as a job on JobRegistry.';

/** API-key refusals a per-call payment also remedies: the `prepaid-debit` entry is offered beside theirs. */
const PAYABLE_PER_CALL: ReadonlySet<string> = new Set([
  'delegate_not_authorized',
  'insufficient_balance',
  'allowance_exhausted',
  'payment_required',
]);

/** What a call's payment pays for: its model fixes the fee; URL and media type name the x402 resource. */
export interface PaidResource {
  readonly model: string;
  readonly url: string;
  readonly stream: boolean;
}

/**
 * The gateway's side of per-call payments (x402 version 2, scheme `prepaid-debit`; docs/protocol.md): it
 * states the requirements, has the settler verify a `PAYMENT-SIGNATURE` (reserving its nonce), and answers
 * every payment failure with the x402 headers a client pays again from. Settling is the job-orchestrator's.
 */
export class PerCallPayments {
  constructor(
    private readonly settler: PaymentSettlerPort,
    /** Per-payer limits of keyless calls; a call with an API key is held to the key's instead. */
    readonly payerLimits: PayerLimits,
    /** PUBLIC_URL; unset, the paid resource is named by the request's own origin. */
    private readonly publicUrl: string | undefined,
    private readonly logger: Logger,
  ) {}

  /** What a call pays for; PUBLIC_URL (else the request's own origin) names this route. */
  resourceOf(req: Request, body: ChatCompletionRequest): PaidResource {
    const origin = this.publicUrl?.replace(/\/+$/, '') ?? `${req.protocol}://${req.get('host') ?? ''}`;
    return { model: body.model, url: `${origin}${CHAT_COMPLETIONS_PATH}`, stream: body.stream };
  }

  /** The 402 of a call with neither an API key nor a payment (404 `model_not_found` for an unknown model). */
  async paymentRequired(resource: PaidResource): Promise<AppError> {
    const offer = await this.settler.requirements(resource.model, resource.url).catch((error: unknown) => {
      // A settler with no facilitator takes no payments: a call with no key is then simply unauthorized.
      if (isAppError(error) && error.code === 'unsupported_scheme')
        throw new AppError('invalid_api_key', {
          message: 'No API key was sent, and this server takes no per-call payments: send an API key.',
        });
      throw error;
    });
    return new AppError('payment_required', {
      message:
        'This call carries neither an API key nor a payment: pay it with the prepaid-debit entry of accepts (PAYMENT-SIGNATURE), or send an API key.',
      fields: { accepts: [offer.requirements] },
      headers: paymentRequiredHeader('payment_required', resourceJson(resource, offer), [offer.requirements]),
    });
  }

  /**
   * Verifies a `PAYMENT-SIGNATURE`; a good payment's nonce is then held for this call until the job settles
   * it or the call releases it. A refused payment is thrown as its answer, payment headers included.
   */
  async verify(
    paymentSignature: string,
    resource: PaidResource,
    callId: string,
  ): Promise<PaymentReservation> {
    const verdict = await this.settler.verify(paymentSignature, resource.model, resource.url, callId);
    if (verdict.case === 'refused') {
      const { code, message, payer, currentRequirements } = verdict.value;
      throw await this.#refusal(new AppError(code, { message: message || undefined }), resource, {
        payer,
        current: currentRequirements,
      });
    }
    return paymentReservation(this.settler, verdict.value, this.logger);
  }

  /** 400 `invalid_payload` when a payment sent beside an API key is paid by another wallet than the key's. */
  foreignPayer(payment: VerifiedPayment, key: ResolvedApiKey): AppError | undefined {
    if (payment.payer.toLowerCase() === key.wallet.toLowerCase()) return undefined;
    return new AppError('invalid_payload', {
      message: `A payment sent with an API key must be paid by the key's wallet ${key.wallet}, not ${payment.payer}.`,
    });
  }

  /**
   * A failed call's answer with what its caller needs to pay: on a call paid per call, a payment refusal
   * (a settlement refused by the chain, a foreign payer) gets the payment headers; on an API-key call whose
   * wallet cannot pay, the `prepaid-debit` entry is offered beside the delegate one. Anything else is
   * returned as it came.
   */
  async explainFailure(
    error: unknown,
    resource: PaidResource,
    payment: VerifiedPayment | undefined,
  ): Promise<unknown> {
    if (!isAppError(error)) return error;
    if (payment !== undefined)
      return isPaymentRefusalCode(error.code)
        ? this.#refusal(error, resource, { payer: payment.payer, network: payment.network })
        : error;
    return PAYABLE_PER_CALL.has(error.code) ? this.#offeredBeside(error, resource) : error;
  }

  /** `PAYMENT-RESPONSE` of an answered call: the job's submission is the settlement, its fee the amount. */
  answerHeaders(payment: VerifiedPayment): AnswerHeaders {
    return (job, feeWei) =>
      paymentSettledHeader({
        transaction: job.txHash,
        network: payment.network,
        payer: payment.payer,
        amountWei: feeWei,
      });
  }

  /** A refused payment with `PAYMENT-RESPONSE`, and `PAYMENT-REQUIRED` (and on a 402 `accepts`) when the current entry is known. */
  async #refusal(
    error: AppError,
    resource: PaidResource,
    known: { payer?: string; network?: string; current?: PrepaidDebitRequirements },
  ): Promise<AppError> {
    const offer = known.current === undefined ? await this.#currentOffer(resource) : undefined;
    const current = known.current ?? offer?.requirements;
    const headers = paymentRefusedHeader({
      code: error.code,
      network: known.network ?? current?.network ?? '',
      payer: known.payer,
    });
    if (current === undefined) return withAdditions(error, { headers });
    return withAdditions(error, {
      headers: {
        ...headers,
        ...paymentRequiredHeader(error.code, resourceJson(resource, offer), [current]),
      },
      fields: error.httpStatus === 402 ? { accepts: [current] } : {},
    });
  }

  /** An API-key 402 with the `prepaid-debit` entry after its own, and in `PAYMENT-REQUIRED`. */
  async #offeredBeside(error: AppError, resource: PaidResource): Promise<AppError> {
    const offer = await this.#currentOffer(resource);
    if (offer === undefined) return error;
    const accepts: unknown[] = Array.isArray(error.fields.accepts) ? error.fields.accepts : [];
    return withAdditions(error, {
      fields: { accepts: [...accepts, offer.requirements] },
      headers: paymentRequiredHeader(error.code, resourceJson(resource, offer), [offer.requirements]),
    });
  }

  /** The current offer, or undefined when the settler cannot say: the answer then goes without it. */
  async #currentOffer(resource: PaidResource): Promise<PaymentOffer | undefined> {
    try {
      return await this.settler.requirements(resource.model, resource.url);
    } catch (error) {
      // A settler with no facilitator has none to offer; anything else is worth a look.
      if (!(isAppError(error) && error.code === 'unsupported_scheme'))
        this.logger.warn(
          { err: error, model: resource.model },
          'could not read the per-call payment requirements; answering without them',
        );
      return undefined;
    }
  }
}

/** The x402 `resource`: this route, answered as JSON or as an event stream. */
function resourceJson(resource: PaidResource, offer: PaymentOffer | undefined): PaymentResource {
  return {
    url: resource.url,
    description: offer?.resource.description || RESOURCE_DESCRIPTION,
    mimeType: resource.stream ? 'text/event-stream' : 'application/json',
  };
}

/** The same error with more fields and response headers. */
function withAdditions(
  error: AppError,
  additions: { fields?: ErrorFields; headers: Record<string, string> },
): AppError {
  return new AppError(error.code, {
    message: error.message,
    fields: { ...error.fields, ...additions.fields },
    retryAfterSeconds: error.retryAfterSeconds,
    headers: { ...error.headers, ...additions.headers },
    cause: error,
  });
}
