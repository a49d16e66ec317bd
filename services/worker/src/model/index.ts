export {
  ModelGenerationError,
  type ConversationMessage,
  type GenerationEvent,
  type GenerationRequest,
  type ModelBackend,
} from './model-backend.js';
export {
  conversationFingerprint,
  deterministicAnswer,
  restartedDeterministicAnswer,
  tokenize,
} from './deterministic-answer.js';
export {
  faultDirectiveIn,
  parseGenerationFault,
  type GenerationFault,
  type GenerationFaultKind,
} from './generation-faults.js';
export { DeterministicModel, type DeterministicModelOptions } from './deterministic-model.js';
export { OpenAiUpstream, type OpenAiUpstreamOptions } from './openai-upstream.js';
export { ModelRouter } from './model-router.js';
