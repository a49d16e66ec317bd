import type { GenService } from '@bufbuild/protobuf/codegenv2';
import type {
  PaymentRefusal as PaymentRefusalMessage,
  PaymentSettler,
} from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import {
  AppError,
  appErrorFromRpc,
  paymentRefusalFromProto,
  prepaidDebitRequirementsFromProto,
} from '@svc/platform';
import { isRpcError, type ServiceClient } from '@svc/proto';
import type {
  PaymentOffer,
  PaymentRefusal,
  PaymentSettlerPort,
  PaymentVerdict,
} from './payment-settler-port.js';

export type PaymentSettlerMethods = typeof PaymentSettler extends GenService<infer S> ? S : never;
export type PaymentSettlerClient = ServiceClient<PaymentSettlerMethods>;

const WEI = /^[0-9]{1,78}$/;

/**
 * Per-call payments over the payment-settler's gRPC API. Unary calls carry the client's deadline; its
 * errors (`model_not_found`, `unexpected_verify_error`, ...) arrive as the AppErrors they name.
 */
export class SettlerPayments implements PaymentSettlerPort {
  /** `reservationTtlMs`: how long a verified payment's nonce stays reserved if nobody settles or releases it. */
  constructor(
    private readonly settler: PaymentSettlerClient,
    private readonly reservationTtlMs: number,
  ) {}

  async requirements(model: string, resourceUrl: string): Promise<PaymentOffer> {
    const { requirements, resource } = await this.settler
      .getRequirements({ model, resourceUrl })
      .catch(unverifiable);
    if (requirements === undefined) throw new Error('the payment-settler sent no requirements');
    return {
      requirements: prepaidDebitRequirementsFromProto(requirements),
      resource: {
        url: resource?.url || resourceUrl,
        description: resource?.description ?? '',
        mimeType: resource?.mimeType ?? '',
      },
    };
  }

  async verify(
    paymentSignature: string,
    model: string,
    resourceUrl: string,
    requestId: string,
  ): Promise<PaymentVerdict> {
    const { outcome } = await this.settler
      .verifyPayment(
        {
          paymentSignature,
          model,
          resourceUrl,
          requestId,
          reservationTtl: { seconds: BigInt(Math.ceil(this.reservationTtlMs / 1000)) },
        },
        { requestId },
      )
      .catch(unverifiable);
    switch (outcome.case) {
      case 'verified': {
        const { reservationId, payer, nonce, amountWei, network } = outcome.value;
        const amount = amountWei?.decimal ?? '';
        if (!payer?.hex || !WEI.test(amount))
          throw new Error('the payment-settler verified a payment without a payer or a valid amount');
        return {
          case: 'verified',
          value: {
            reservationId,
            payer: payer.hex,
            nonce: nonce?.hex ?? '',
            amountWei: BigInt(amount),
            network,
          },
        };
      }
      case 'refused':
        return { case: 'refused', value: refusalOf(outcome.value) };
      case undefined:
        throw new Error('the payment-settler answered VerifyPayment with no outcome');
    }
  }

  async release(reservationId: string): Promise<void> {
    await this.settler.releasePayment({ reservationId }).catch(asAppError);
  }
}

function refusalOf(refusal: PaymentRefusalMessage): PaymentRefusal {
  const code = paymentRefusalFromProto(refusal.code);
  // A code this gateway does not know yet is a contract mismatch, not the caller's fault.
  if (code === undefined) throw new Error(`the payment-settler refused a payment with code ${refusal.code}`);
  return {
    code,
    message: refusal.message,
    ...(refusal.payer?.hex ? { payer: refusal.payer.hex } : {}),
    ...(refusal.currentRequirements
      ? { currentRequirements: prepaidDebitRequirementsFromProto(refusal.currentRequirements) }
      : {}),
  };
}

function asAppError(error: unknown): never {
  throw isRpcError(error) ? appErrorFromRpc(error) : error;
}

/**
 * The settler's own answer, or, when it could not be heard (down, or past its deadline), 502
 * `unexpected_verify_error`: the payment could not be checked, and the caller sends it again.
 */
function unverifiable(error: unknown): never {
  const answer = isRpcError(error) ? appErrorFromRpc(error) : error;
  if (answer instanceof AppError && answer.code !== 'internal') throw answer;
  throw new AppError('unexpected_verify_error', {
    message: 'The payment could not be checked: send the same PAYMENT-SIGNATURE again.',
    cause: error,
  });
}
