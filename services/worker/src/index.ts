export { loadWorkerConfig, parseModelMap, workerConfigShape, type WorkerConfig } from './config.js';
export { startWorker } from './service.js';
export type {
  RunningWorker,
  WorkerDependencies,
  WorkerLinkSettings,
  WorkerSettings,
  WorkerStatus,
} from './worker-types.js';
export * from './model/index.js';
export { buildModelBackend } from './model/build-model-backend.js';
export { loadOrCreateWorkerKey, WorkerKeystoreError, type WorkerKey } from './identity/worker-keystore.js';
export { ensureWorkerRegistered, WorkerDeregisteredError } from './registration/worker-registration.js';
export { SessionKeyVault } from './sessions/session-key-vault.js';
export { FinalAnswerJournal, type SignedFinalAnswer } from './jobs/final-answer-journal.js';
export type { AnswerChannel } from './jobs/answer-channel.js';
export type { DeltaFrame } from './jobs/answer-stream.js';
export { linkBackoff, WorkerLink } from './link/worker-link.js';
export { HealthServer } from './health/health-server.js';
export { workerModule, type WorkerInstance } from './module.js';
