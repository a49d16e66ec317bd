import { Wallet, type JsonRpcProvider } from 'ethers';
import { OperatorLanes, StoreSentTransactionJournal, TransactionSender, type ChainClient } from '@svc/chain';
import type { Logger, Store } from '@svc/platform';
import type { Registry } from 'prom-client';
import type { PaymentSettlerConfig } from './config.js';
import { PaymentSettlerMetrics } from './observability/payment-settler-metrics.js';
import type { PaymentSettlerParts } from './payment-settler-service.js';
import { NonceReservations } from './payments/nonce-reservations.js';
import { PaymentSettlement } from './payments/payment-settlement.js';
import { PaymentTerms, sameAddress } from './payments/payment-terms.js';
import { PaymentVerifier } from './payments/payment-verifier.js';

export interface PaymentSettlerPorts {
  readonly config: PaymentSettlerConfig;
  readonly store: Store;
  readonly chain: ChainClient;
  readonly provider: JsonRpcProvider;
  readonly chainId: bigint;
  readonly logger: Logger;
  /** Where its metrics are registered (the process's registry); default a registry of their own. */
  readonly metrics?: Registry;
}

/**
 * The settler's parts, or undefined when no facilitator is configured (no per-call payments). Nothing
 * here touches the network; `verifyFacilitatorSetup` must pass before payments are taken.
 */
export function buildPaymentSettler(ports: PaymentSettlerPorts): PaymentSettlerParts | undefined {
  const { config, store, chain, provider, chainId, logger } = ports;
  if (!config.FACILITATOR_PRIVATE_KEY) return undefined;
  if (!config.PAY_TO_ADDRESS || !/^0x[0-9a-fA-F]{40}$/.test(config.PAY_TO_ADDRESS))
    throw new Error(
      "PAY_TO_ADDRESS must be the address of the service's signer (the owner of its sessions) when FACILITATOR_PRIVATE_KEY is set",
    );
  const facilitator = new Wallet(config.FACILITATOR_PRIVATE_KEY, provider);
  const operators = config.FACILITATOR_OPERATOR_PRIVATE_KEYS.map((key) => new Wallet(key, provider));
  const sender = new TransactionSender({
    provider,
    nonces: store.nonces,
    journal: new StoreSentTransactionJournal(store),
    // Settlements carry a blob: they only ever use the blob lane.
    lanes: new OperatorLanes({ blob: operators.length > 0 ? operators : [facilitator], plain: [] }),
    maxFeePerBlobGas: config.MAX_FEE_PER_BLOB_GAS,
    pollIntervalMs: config.TX_POLL_INTERVAL,
    replaceAfterMs: config.TX_REPLACE_AFTER,
  });
  const terms = new PaymentTerms(
    chain,
    { chainId, facilitator: facilitator.address, payTo: config.PAY_TO_ADDRESS },
    config.CHAIN_CACHE_TTL,
  );
  const reservations = new NonceReservations(store.values, store.locks, config.SETTLED_PAYMENT_TTL);
  const metrics = new PaymentSettlerMetrics(ports.metrics);
  return {
    terms,
    reservations,
    verifier: new PaymentVerifier(chain, terms, reservations, metrics),
    settlement: new PaymentSettlement({
      chain,
      provider,
      sender,
      reservations,
      maxFeePerBlobGas: config.MAX_FEE_PER_BLOB_GAS,
      metrics,
      logger,
    }),
    defaultReservationTtlMs: config.PAYMENT_RESERVATION_TTL,
  };
}

/**
 * Start-up check of the per-call setup: `payTo` authorized the facilitator as its delegate, and every
 * operator accepted the facilitator's offer. Throws naming exactly what is missing and how to fix it.
 */
export async function verifyFacilitatorSetup(
  config: PaymentSettlerConfig,
  parts: PaymentSettlerParts,
  chain: ChainClient,
): Promise<void> {
  const { facilitator, payTo } = parts.terms.parties;
  const problems: string[] = [];
  if (!(await parts.terms.facilitatorAuthorized()))
    problems.push(
      `the facilitator ${facilitator} is not an authorized delegate of PAY_TO_ADDRESS ${payTo}: send setDelegateAuthorization(${facilitator}, true) from ${payTo}`,
    );
  for (const key of config.FACILITATOR_OPERATOR_PRIVATE_KEYS) {
    const operator = new Wallet(key).address;
    if (sameAddress(await chain.principalOf(operator), facilitator)) continue;
    const offered = await chain.jobRegistry.isOperatorOffered(facilitator, operator);
    problems.push(
      offered
        ? `operator ${operator} has an offer from the facilitator ${facilitator} but has not accepted it: send acceptOperator(${facilitator}) from ${operator}`
        : `operator ${operator} is not an operator of the facilitator ${facilitator}: send setOperator(${operator}, true) from the facilitator, then acceptOperator(${facilitator}) from ${operator}`,
    );
  }
  if (problems.length > 0)
    throw new Error(`the payment-settler's per-call setup is not ready:\n  ${problems.join('\n  ')}`);
}
