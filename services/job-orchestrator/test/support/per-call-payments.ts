import type { Signer } from 'ethers';
import type { PrepaidDebitRequirements as RequirementsMessage } from '@svc/proto/gen/svc/common/v1/payment_option_pb';
import { ChatRole } from '@svc/proto/gen/svc/common/v1/chat_pb';
import { paymentSignatureFor, type PaymentOptions, type PrepaidDebitRequirements } from '@svc/x402';
import type { CompletionRequest, CompletionStack } from './completion-stack.js';
import { MODEL } from './models.js';

const RESOURCE = 'http://gateway.test/v1/chat/completions';

/** The requirements message in the x402 JSON shape a payer signs. */
export function requirementsJson(message: RequirementsMessage): PrepaidDebitRequirements {
  return {
    scheme: 'prepaid-debit',
    network: message.network,
    amount: message.amount!.decimal,
    asset: message.asset!.hex,
    payTo: message.payTo!.hex,
    maxTimeoutSeconds: message.maxTimeoutSeconds,
    extra: {
      name: message.extra!.name,
      version: message.extra!.version,
      facilitatorAddress: message.extra!.facilitatorAddress!.hex,
    },
  };
}

/** The settler's current requirements for the test model. */
export async function currentRequirements(stack: CompletionStack): Promise<PrepaidDebitRequirements> {
  const { requirements } = await stack.settler!.getRequirements({ model: MODEL.name, resourceUrl: RESOURCE });
  return requirementsJson(requirements!);
}

/** A `PAYMENT-SIGNATURE` from `payer` for the current requirements. */
export async function signedPayment(
  stack: CompletionStack,
  payer: Signer,
  options: PaymentOptions = {},
): Promise<string> {
  return paymentSignatureFor(payer, await currentRequirements(stack), options);
}

/** Verifies a payment at the settler; its reservation id and payer, or the refusal. */
export async function verify(stack: CompletionStack, paymentSignature: string) {
  const { outcome } = await stack.settler!.verifyPayment({
    paymentSignature,
    model: MODEL.name,
    resourceUrl: RESOURCE,
    requestId: 'test',
  });
  return outcome;
}

let calls = 0;

/** A per-call `RunCompletion` request for a verified payment. */
export function perCallRequest(
  verified: { reservationId: string; payer: string; amountWei: bigint },
  content: string,
): CompletionRequest {
  return {
    requestId: `per-call-${++calls}`,
    model: MODEL.name,
    messages: [{ role: ChatRole.USER, content }],
    stream: true,
    payment: {
      case: 'prepaidDebit',
      value: {
        paymentReservationId: verified.reservationId,
        payer: { hex: verified.payer },
        amountWei: { decimal: verified.amountWei.toString() },
      },
    },
  };
}
