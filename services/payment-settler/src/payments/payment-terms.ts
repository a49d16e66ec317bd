import { modelIdOf } from '@svc/contracts';
import type { ChainClient } from '@svc/chain';
import { AppError, Remembered } from '@svc/platform';
import { networkOf, PREPAID_DEBIT, type PrepaidDebitRequirements } from '@svc/x402';

/** Who takes per-call payments here: the facilitator that settles them, for the owner of the sessions. */
export interface PaymentParties {
  readonly chainId: bigint;
  /** The account payments must name as `facilitator` (a principal; its operators send for it). */
  readonly facilitator: string;
  /** The owner of the service's sessions: payments' `payTo`. */
  readonly payTo: string;
}

/** Models whose fee is remembered at once; past it the one remembered longest ago is forgotten. */
const REMEMBERED_FEES = 256;

/**
 * The current `prepaid-debit` requirements of a model (docs/protocol.md): its fee, the job timeout as
 * `maxTimeoutSeconds` and the facilitator's authorization by `payTo`, each remembered for `cacheTtlMs`
 * (they change only by an owner's transaction), so a stream of 402s costs the chain one read per model and
 * TTL, not one per call. A fee raised within the TTL is still the chain's to enforce: the settlement debits
 * the fee on chain and refuses one above the payment's `maxAmount` (`over_cap`).
 */
export class PaymentTerms {
  readonly #jobTimeout: Remembered<number>;
  readonly #facilitatorAuthorized: Remembered<boolean>;
  /** Fees by model name (a 0 for an unknown or disabled model is remembered too). */
  readonly #fees = new Map<string, Remembered<bigint>>();

  constructor(
    private readonly chain: ChainClient,
    readonly parties: PaymentParties,
    private readonly cacheTtlMs: number,
  ) {
    this.#jobTimeout = new Remembered(cacheTtlMs, async () => {
      const parameters = await chain.refreshParameters();
      return parameters.jobTimeoutSeconds;
    });
    this.#facilitatorAuthorized = new Remembered(cacheTtlMs, async () =>
      sameAddress(parties.facilitator, parties.payTo)
        ? true
        : chain.isDelegateAuthorized(parties.payTo, parties.facilitator),
    );
  }

  get network(): string {
    return networkOf(this.parties.chainId);
  }

  /** The one `accepts` entry for a call of `model`; `model_not_found` when it is unknown or disabled. */
  async requirementsFor(model: string): Promise<PrepaidDebitRequirements> {
    const [fee, jobTimeout] = await Promise.all([this.#feeOf(model), this.#jobTimeout.get()]);
    return {
      scheme: PREPAID_DEBIT,
      network: this.network,
      amount: fee.toString(),
      asset: this.chain.addresses.jobRegistry,
      payTo: this.parties.payTo,
      maxTimeoutSeconds: jobTimeout,
      extra: { name: 'JobRegistry', version: '1', facilitatorAddress: this.parties.facilitator },
    };
  }

  /** Whether `payTo` lets the facilitator settle for it (JobRegistry's delegate authorization). */
  facilitatorAuthorized(): Promise<boolean> {
    return this.#facilitatorAuthorized.get();
  }

  async #feeOf(model: string): Promise<bigint> {
    const fee = model.length > 0 ? await this.#rememberedFee(model).get() : 0n;
    if (fee === 0n)
      throw new AppError('model_not_found', { message: `The model '${model}' does not exist.` });
    return fee;
  }

  #rememberedFee(model: string): Remembered<bigint> {
    let fee = this.#fees.get(model);
    if (fee === undefined) {
      if (this.#fees.size >= REMEMBERED_FEES) this.#fees.delete(this.#fees.keys().next().value!);
      fee = new Remembered(this.cacheTtlMs, () => this.chain.jobFee(modelIdOf(model)));
      this.#fees.set(model, fee);
    }
    return fee;
  }
}

export function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}
