export {
  jobOrchestratorConfigShape,
  loadJobOrchestratorConfig,
  type JobOrchestratorConfig,
} from './config.js';
export { buildWorkerLinkServer, type JobOrchestratorPorts } from './service.js';
export { jobOrchestratorModule, type JobOrchestratorInstance } from './module.js';
export {
  WorkerLinkServer,
  type LinkedWorkers,
  type LinkHint,
  type WorkerLinkServerOptions,
} from './link/worker-link-server.js';
export { WORKER_PRESENCE_GROUP, type LiveWorker, type WorkerOffer } from './link/worker-presence.js';
export { RegistryJobAttempts, type CurrentAttempt, type JobAttempts } from './link/job-attempts.js';
export { RegistryWorkerAdmission, type WorkerAdmission } from './link/worker-admission.js';
export {
  AnswerFrameIntake,
  frameDedupId,
  jobFrameStreamKey,
  type AnswerFrame,
  type IntakeVerdict,
} from './link/answer-frame-intake.js';
