import { env, loadConfig, type ConfigOf } from '@svc/platform';

/**
 * Every setting of the job-orchestrator, read once from the environment at start-up (the store, the
 * chain and the gRPC server are the runner's: see @svc/runtime). Defaults run the all-in-one mode.
 * Names start with `LINK_` where they tune the worker link, apart from the worker's own link settings.
 */
export const jobOrchestratorConfigShape = {
  LINK_HEARTBEAT_INTERVAL: env.durationMs({
    doc: 'How often a linked worker must heartbeat (sent to it in the welcome).',
    default: '5s',
  }),
  LINK_PRESENCE_TTL: env.durationMs({
    doc: 'How long one heartbeat keeps a worker listed as live for every replica; a link with no heartbeat for this long is ended (`HEARTBEAT_MISSED`). A few heartbeat intervals, so one late beat does not drop a worker.',
    default: '15s',
  }),
  LINK_CHALLENGE_TTL: env.durationMs({
    doc: 'How long a worker has to sign the link challenge before the link is refused.',
    default: '30s',
  }),
  LINK_WORKER_STATUS_CACHE_TTL: env.durationMs({
    doc: 'How long whether an address is an active registered worker (WorkerRegistry `isActive`) is remembered, so a redialling worker does not cost a chain read per dial.',
    default: '5s',
  }),
  LINK_ORCHESTRATOR_NAME: env.string({
    doc: 'How this deployment names itself in the link challenge a worker signs (so a signature is worth nothing to another service).',
    default: 'svc job-orchestrator',
  }),
};

export type JobOrchestratorConfig = ConfigOf<typeof jobOrchestratorConfigShape>;

export function loadJobOrchestratorConfig(source: NodeJS.ProcessEnv = process.env): JobOrchestratorConfig {
  return loadConfig(jobOrchestratorConfigShape, source);
}
