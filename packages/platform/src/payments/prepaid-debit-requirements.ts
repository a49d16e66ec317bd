import type { MessageInitShape } from '@bufbuild/protobuf';
import type {
  PrepaidDebitRequirements as PrepaidDebitRequirementsMessage,
  PrepaidDebitRequirementsSchema,
} from '@svc/proto/gen/svc/common/v1/payment_option_pb';
import { PREPAID_DEBIT, type PrepaidDebitRequirements } from '@svc/x402';

// The `prepaid-debit` entry of `accepts` between its x402 JSON shape and its gRPC form (the settler's
// requirements, an orchestrator's 402). A payment echoes the JSON verbatim as `accepted` and the settler
// compares every field, so both directions are built in this one place, amounts as decimal strings.

/** The JSON entry a payer signs, from its gRPC form. */
export function prepaidDebitRequirementsFromProto(
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

/** The gRPC form of a JSON entry. */
export function prepaidDebitRequirementsToProto(
  requirements: PrepaidDebitRequirements,
): MessageInitShape<typeof PrepaidDebitRequirementsSchema> {
  return {
    scheme: requirements.scheme,
    network: requirements.network,
    amount: { decimal: requirements.amount },
    asset: { hex: requirements.asset },
    payTo: { hex: requirements.payTo },
    maxTimeoutSeconds: requirements.maxTimeoutSeconds,
    extra: {
      name: requirements.extra.name,
      version: requirements.extra.version,
      facilitatorAddress: { hex: requirements.extra.facilitatorAddress },
    },
  };
}

function malformed(what: string): Error {
  return new Error(`a prepaid-debit requirements entry with ${what}`);
}
