import {
  ModelGenerationError,
  type GenerationEvent,
  type GenerationRequest,
  type ModelBackend,
} from './model-backend.js';

/** Several backends behind one: each model name goes to the backend that serves it. */
export class ModelRouter implements ModelBackend {
  readonly models: readonly string[];
  readonly #byModel = new Map<string, ModelBackend>();

  constructor(backends: readonly ModelBackend[]) {
    for (const backend of backends) {
      for (const model of backend.models) {
        if (this.#byModel.has(model)) throw new RangeError(`model "${model}" is served by two backends`);
        this.#byModel.set(model, backend);
      }
    }
    this.models = [...this.#byModel.keys()];
  }

  generate(request: GenerationRequest): AsyncIterable<GenerationEvent> {
    const backend = this.#byModel.get(request.model);
    if (!backend) throw new ModelGenerationError(`no backend serves model "${request.model}"`);
    return backend.generate(request);
  }
}
