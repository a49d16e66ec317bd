// x402 version 2, scheme `prepaid-debit` (docs/protocol.md, Per-call payment): the JSON carried, base64
// encoded, in the PAYMENT-REQUIRED, PAYMENT-SIGNATURE and PAYMENT-RESPONSE headers. `@svc/x402` encodes and
// decodes the headers and signs payments; the shapes are these.

/** The one x402 version this service speaks. */
export const X402_VERSION = 2;
/** The one scheme it takes. */
export const PREPAID_DEBIT = 'prepaid-debit';

export const PAYMENT_REQUIRED_HEADER = 'PAYMENT-REQUIRED';
export const PAYMENT_SIGNATURE_HEADER = 'PAYMENT-SIGNATURE';
export const PAYMENT_RESPONSE_HEADER = 'PAYMENT-RESPONSE';

/** The `prepaid-debit` entry of `accepts`; a payment echoes it verbatim as `accepted`. */
export interface PrepaidDebitRequirements {
  readonly scheme: typeof PREPAID_DEBIT;
  /** CAIP-2, `eip155:<chainId>`. */
  readonly network: string;
  /** The job fee in wei, as a decimal string. */
  readonly amount: string;
  /** JobRegistry, which holds the payer's prepaid balance. */
  readonly asset: string;
  /** The owner of the service's sessions. */
  readonly payTo: string;
  /** The job timeout read from the chain. */
  readonly maxTimeoutSeconds: number;
  readonly extra: {
    /** EIP-712 domain name, "JobRegistry". */
    readonly name: string;
    /** EIP-712 domain version, "1". */
    readonly version: string;
    /** The account a payment must name as its facilitator. */
    readonly facilitatorAddress: string;
  };
}

/** The paid resource of `PAYMENT-REQUIRED`. */
export interface PaymentResource {
  readonly url: string;
  readonly description: string;
  readonly mimeType: string;
}

/** `PAYMENT-REQUIRED`: why the call was not served and how to pay for it. */
export interface PaymentRequired {
  readonly x402Version: typeof X402_VERSION;
  /** The refusal's code, e.g. `payment_required`. */
  readonly error: string;
  readonly resource: PaymentResource;
  readonly accepts: readonly PrepaidDebitRequirements[];
}

/** The debit a payer signs (EIP-712 `DebitAuthorization`), amounts and deadline as decimal strings. */
export interface DebitAuthorizationJson {
  readonly payer: string;
  readonly payTo: string;
  readonly facilitator: string;
  /** The most the payment may debit, in wei. */
  readonly maxAmount: string;
  /** Unix seconds; valid while the block's timestamp is not past it. */
  readonly deadline: string;
  /** 32 random bytes, 0x-hex. */
  readonly nonce: string;
}

/** `PAYMENT-SIGNATURE`. */
export interface PaymentPayload {
  readonly x402Version: typeof X402_VERSION;
  readonly accepted: PrepaidDebitRequirements;
  readonly payload: {
    /** The payer's EIP-712 signature over the authorization: 65 bytes, 0x-hex, low s. */
    readonly signature: string;
    readonly authorization: DebitAuthorizationJson;
  };
}

/** `PAYMENT-RESPONSE` of a settled payment. */
export interface PaymentSettledResponse {
  readonly success: true;
  /** The settlement transaction, which also submitted the job. */
  readonly transaction: string;
  readonly network: string;
  readonly payer: string;
  /** What was debited, in wei. */
  readonly amount: string;
}

/** `PAYMENT-RESPONSE` of a refused payment. */
export interface PaymentRefusedResponse {
  readonly success: false;
  /** The refusal's code, as in the error body. */
  readonly errorReason: string;
  readonly transaction: '';
  readonly network: string;
  readonly payer: string;
}

export type PaymentResponse = PaymentSettledResponse | PaymentRefusedResponse;
