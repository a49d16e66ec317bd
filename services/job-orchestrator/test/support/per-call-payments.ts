import { parseEther, type Signer, type Wallet } from 'ethers';
import { connectJobRegistry } from '@svc/contracts';
import { prepaidDebitRequirementsFromProto } from '@svc/platform';
import type { Devnet } from '@svc/testkit';
import { ChatRole } from '@svc/proto/gen/svc/common/v1/chat_pb';
import { paymentSignatureFor, type PaymentOptions, type PrepaidDebitRequirements } from '@svc/x402';
import type { CompletionEvents, CompletionRequest, CompletionStack } from './completion-stack.js';
import { MODEL } from './models.js';
import { fundedWallet } from './reference-worker.js';

const RESOURCE = 'http://gateway.test/v1/chat/completions';

/** The settler's current requirements for the test model. */
export async function currentRequirements(stack: CompletionStack): Promise<PrepaidDebitRequirements> {
  const { requirements } = await stack.settler!.getRequirements({ model: MODEL.name, resourceUrl: RESOURCE });
  return prepaidDebitRequirementsFromProto(requirements!);
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

/** A payment the settler verified and holds. */
export interface VerifiedPayment {
  readonly reservationId: string;
  readonly payer: string;
  readonly amountWei: bigint;
}

/** Verifies a payment that must pass. */
export async function verifiedPayment(
  stack: CompletionStack,
  paymentSignature: string,
): Promise<VerifiedPayment> {
  const outcome = await verify(stack, paymentSignature);
  if (outcome.case !== 'verified') throw new Error(`payment refused: ${JSON.stringify(outcome.value)}`);
  const { reservationId, payer, amountWei } = outcome.value;
  return { reservationId, payer: payer!.hex, amountWei: BigInt(amountWei!.decimal) };
}

/** Runs a completion paid by a verified payment and collects its events. */
export async function runPaid(
  stack: CompletionStack,
  payment: VerifiedPayment,
  content: string,
): Promise<CompletionEvents> {
  const events: CompletionEvents = [];
  for await (const response of stack.client.runCompletion(perCallRequest(payment, content)))
    events.push(response.event);
  return events;
}

/** A fresh wallet with `deposit` in its prepaid balance and no delegate: it can only pay per call. */
export async function depositedWallet(devnet: Devnet, deposit = parseEther('1')): Promise<Wallet> {
  const wallet = (await fundedWallet(devnet)).connect(devnet.provider);
  const registry = connectJobRegistry(devnet.deployment.jobRegistryAddress, wallet);
  await (await registry.deposit({ value: deposit })).wait();
  return wallet;
}

let calls = 0;

/** A per-call `RunCompletion` request for a verified payment. */
export function perCallRequest(verified: VerifiedPayment, content: string): CompletionRequest {
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
