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

/**
 * The current `prepaid-debit` requirements of a model (docs/protocol.md): its fee read now (what the
 * settlement debits, so never stale), the job timeout as `maxTimeoutSeconds` (remembered briefly, it
 * changes only by an owner's transaction), and the facilitator's authorization by `payTo` (remembered
 * as briefly).
 */
export class PaymentTerms {
  readonly #jobTimeout: Remembered<number>;
  readonly #facilitatorAuthorized: Remembered<boolean>;

  constructor(
    private readonly chain: ChainClient,
    readonly parties: PaymentParties,
    cacheTtlMs: number,
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
    const fee = model.length > 0 ? await this.chain.jobFee(modelIdOf(model)) : 0n;
    if (fee === 0n)
      throw new AppError('model_not_found', { message: `The model '${model}' does not exist.` });
    return fee;
  }
}

export function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase();
}
