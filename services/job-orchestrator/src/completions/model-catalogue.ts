import { modelIdOf } from '@svc/contracts';
import type { ChainClient } from '@svc/chain';
import { AppError, Remembered } from '@svc/platform';
import type { LinkedWorkers } from '../link/worker-link-server.js';

/** A model configured on chain with a fee (enabled). */
export interface ConfiguredModel {
  readonly name: string;
  readonly modelId: string;
  readonly fee: bigint;
}

/**
 * The models the service can run: configured and enabled on JobRegistry, and served by at least one
 * worker heartbeating now. The model list and an unpaused JobRegistry are remembered for `cacheTtlMs` (a
 * pause missed meanwhile still stops the submission: it reverts in simulation, before anything is signed);
 * a pause is re-read on every call, so calls resume the moment JobRegistry is unpaused. A model's fee is
 * read on every call (it is what the gateway reserves and the job is submitted with).
 */
export class ModelCatalogue {
  readonly #configured: Remembered<ConfiguredModel[]>;
  readonly #paused: Remembered<boolean>;

  constructor(
    private readonly chain: ChainClient,
    private readonly workers: Pick<LinkedWorkers, 'live'>,
    cacheTtlMs: number,
  ) {
    this.#configured = new Remembered(cacheTtlMs, () => this.#readConfigured());
    this.#paused = new Remembered(cacheTtlMs, () => this.chain.isPaused());
  }

  /** Enabled models served by a live worker, in the chain's order. */
  async runnable(): Promise<ConfiguredModel[]> {
    const [configured, live] = await Promise.all([this.#configured.get(), this.workers.live()]);
    const served = new Set(live.flatMap((worker) => worker.models));
    return configured.filter((model) => served.has(model.name));
  }

  /** The model and its current fee, read now; `model_not_found` when it is not configured or disabled. */
  async model(name: string): Promise<ConfiguredModel> {
    const modelId = modelIdOf(name);
    const fee = await this.chain.jobFee(modelId);
    if (fee === 0n) throw new AppError('model_not_found', { message: `The model '${name}' does not exist.` });
    return { name, modelId, fee };
  }

  async isPaused(): Promise<boolean> {
    const paused = await this.#paused.get();
    if (paused) this.#paused.forget();
    return paused;
  }

  async #readConfigured(): Promise<ConfiguredModel[]> {
    const registry = this.chain.jobRegistry;
    const ids = await registry.modelIds();
    const models = await Promise.all(
      ids.map(async (modelId) => {
        const [name, fee] = await Promise.all([registry.modelName(modelId), registry.jobFee(modelId)]);
        return { name, modelId, fee };
      }),
    );
    return models.filter((model) => model.fee > 0n);
  }
}
