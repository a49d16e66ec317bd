import type { PrepaidDebitRequirements as PrepaidDebitRequirementsMessage } from '@svc/proto/gen/svc/common/v1/payment_option_pb';
import { PREPAID_DEBIT, type PrepaidDebitRequirements } from '@svc/x402';

/**
 * The `prepaid-debit` entry of `accepts` in its x402 JSON shape, from its gRPC form (the settler's
 * requirements, an orchestrator's 402). A payment echoes this JSON verbatim as `accepted` and the settler
 * compares every field, so it is built in this one place, amounts as decimal strings.
 */
export function prepaidDebitRequirementsJson(
  message: PrepaidDebitRequirementsMessage,
): PrepaidDebitRequirements {
  if (message.scheme !== PREPAID_DEBIT) throw malformed(`scheme ${JSON.stringify(message.scheme)}`);
  const { amount, asset, payTo, extra } = message;
  if (!amount?.decimal || !asset?.hex || !payTo?.hex || !extra?.facilitatorAddress?.hex)
    throw malformed('a missing amount, asset, payTo or extra.facilitatorAddress');
  return {
    scheme: PREPAID_DEBIT,
    network: message.network,
    amount: amount.decimal,
    asset: asset.hex,
    payTo: payTo.hex,
    maxTimeoutSeconds: message.maxTimeoutSeconds,
    extra: { name: extra.name, version: extra.version, facilitatorAddress: extra.facilitatorAddress.hex },
  };
}

function malformed(what: string): Error {
  return new Error(`a prepaid-debit requirements entry with ${what}`);
}
