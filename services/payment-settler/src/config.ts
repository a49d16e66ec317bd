import { env, loadConfig, serviceTokenServerSettings, type ConfigOf } from '@svc/platform';

/**
 * Every setting of the payment-settler, read once at start-up (the store, the chain and the gRPC server
 * are the runner's: see @svc/runtime). Without a facilitator key the settler takes no per-call payments
 * and answers `unsupported_scheme`.
 */
export const paymentSettlerConfigShape = {
  FACILITATOR_PRIVATE_KEY: env.optionalString({
    doc: "The facilitator's principal (32 bytes of hex, from a secret store): the account per-call payments name as `facilitator`, authorized as a delegate by PAY_TO_ADDRESS. Unset: this server takes no per-call payments (`unsupported_scheme`). The all-in-one target uses the devnet's facilitator.",
    secret: true,
  }),
  FACILITATOR_OPERATOR_PRIVATE_KEYS: env.list({
    doc: "Comma-separated keys of the facilitator's operators that send the settlements (blob transactions); each must have accepted the facilitator's operator offer (`setOperator`, then `acceptOperator`). Empty: the facilitator sends them itself.",
    default: [],
    secret: true,
  }),
  PAY_TO_ADDRESS: env.optionalString({
    doc: "The `payTo` of per-call payments: the owner of the service's sessions, i.e. the job-orchestrator's service signer (its address, not its key). Required with FACILITATOR_PRIVATE_KEY.",
  }),
  MAX_FEE_PER_BLOB_GAS: env.wei({
    doc: 'The most a settlement pays per unit of blob gas, unless the caller gives a lower maximum.',
    default: 50n * 10n ** 9n,
  }),
  TX_POLL_INTERVAL: env.durationMs({
    doc: 'How often a sent settlement is looked for on chain (a quarter of the block time suits).',
    default: '250ms',
  }),
  TX_REPLACE_AFTER: env.durationMs({
    doc: 'A settlement still pending this long is replaced with higher fees.',
    default: '30s',
  }),
  PAYMENT_RESERVATION_TTL: env.durationMs({
    doc: "How long a verified payment's nonce stays reserved when the caller names no time: long enough for the call to settle.",
    default: '5m',
  }),
  SETTLED_PAYMENT_TTL: env.durationMs({
    doc: 'How long a settlement is remembered by its reservation, so a repeated SettlePayment returns it (the nonce itself is spent on chain for good).',
    default: '24h',
  }),
  CHAIN_CACHE_TTL: env.durationMs({
    doc: "How long the job timeout and the facilitator's authorization are remembered between chain reads (a model's fee is read on every call).",
    default: '5s',
  }),
  ...serviceTokenServerSettings,
};

export type PaymentSettlerConfig = ConfigOf<typeof paymentSettlerConfigShape>;

export function loadPaymentSettlerConfig(source: NodeJS.ProcessEnv = process.env): PaymentSettlerConfig {
  return loadConfig(paymentSettlerConfigShape, source);
}
