import { modelIdOf } from '@svc/contracts';
import type { ChainClient } from '@svc/chain';
import { AppError } from '@svc/platform';
import type { LinkedWorkers } from '../link/worker-link-server.js';

/** A model configured on chain with a fee (enabled). */
export interface ConfiguredModel {
  readonly name: string;
  readonly modelId: string;
  readonly fee: bigint;
}

/**
 * The models the service can run: configured and enabled on JobRegistry, and served by at least one
 * worker heartbeating now. Chain reads are cached for `cacheTtlMs` (fees and pause rarely change; the
 * contract refuses a job whose fee rose above its `maxFee` anyway).
 */
export class ModelCatalogue {
  #configured: { readonly at: number; readonly models: Promise<ConfiguredModel[]> } | undefined;
  #paused: { readonly at: number; readonly paused: Promise<boolean> } | undefined;

  constructor(
    private readonly chain: ChainClient,
    private readonly workers: Pick<LinkedWorkers, 'live'>,
    private readonly cacheTtlMs: number,
  ) {}

  /** Enabled models served by a live worker, in the chain's order. */
  async runnable(): Promise<ConfiguredModel[]> {
    const [configured, live] = await Promise.all([this.configured(), this.workers.live()]);
    const served = new Set(live.flatMap((worker) => worker.models));
    return configured.filter((model) => served.has(model.name));
  }

  /** The model and its current fee; `model_not_found` when it is not configured or disabled. */
  async model(name: string): Promise<ConfiguredModel> {
    const modelId = modelIdOf(name);
    const cached = (await this.configured()).find((model) => model.modelId === modelId);
    const fee = await this.chain.jobFee(modelId);
    if (fee === 0n || (cached && cached.name !== name)) {
      throw new AppError('model_not_found', { message: `The model '${name}' does not exist.` });
    }
    return { name, modelId, fee };
  }

  async isPaused(): Promise<boolean> {
    if (!this.#paused || Date.now() - this.#paused.at >= this.cacheTtlMs) {
      const paused = this.chain.isPaused();
      paused.catch(() => (this.#paused = undefined));
      this.#paused = { at: Date.now(), paused };
    }
    return this.#paused.paused;
  }

  configured(): Promise<ConfiguredModel[]> {
    if (!this.#configured || Date.now() - this.#configured.at >= this.cacheTtlMs) {
      const models = this.#readConfigured();
      models.catch(() => (this.#configured = undefined));
      this.#configured = { at: Date.now(), models };
    }
    return this.#configured.models;
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
