import { parseModelMap, type WorkerConfig } from '../config.js';
import { DeterministicModel } from './deterministic-model.js';
import { parseGenerationFault } from './generation-faults.js';
import type { ModelBackend } from './model-backend.js';
import { OpenAiUpstream } from './openai-upstream.js';

/** The model backend the configuration names. */
export function buildModelBackend(config: WorkerConfig): ModelBackend {
  if (config.MODEL_BACKEND === 'openai') {
    if (!config.UPSTREAM_URL) throw new RangeError('MODEL_BACKEND=openai needs UPSTREAM_URL');
    return new OpenAiUpstream({
      baseUrl: config.UPSTREAM_URL,
      modelMap: parseModelMap(config.UPSTREAM_MODEL_MAP),
      ...(config.UPSTREAM_API_KEY ? { apiKey: config.UPSTREAM_API_KEY } : {}),
      responseTimeoutMs: config.UPSTREAM_RESPONSE_TIMEOUT,
      idleTimeoutMs: config.UPSTREAM_IDLE_TIMEOUT,
    });
  }
  return new DeterministicModel({
    models: config.DETERMINISTIC_MODELS,
    tokensPerSecond: config.DETERMINISTIC_TOKENS_PER_SECOND,
    ...(config.DETERMINISTIC_FAULT ? { fault: parseGenerationFault(config.DETERMINISTIC_FAULT) } : {}),
    faultsFromPrompt: config.DETERMINISTIC_FAULTS_FROM_PROMPT,
  });
}
