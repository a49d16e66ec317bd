import { env, loadConfig, serviceTokenSettings, type ConfigOf } from '@svc/platform';

/**
 * Every setting of the job-orchestrator, read once from the environment at start-up (the store, the
 * chain and the process's gRPC server are the runner's: see @svc/runtime). Defaults run the all-in-one
 * mode. Names start with `LINK_` where they tune the worker link, apart from the worker's own link
 * settings; `WORKER_LINK_` names place the link's own listener.
 */
export const jobOrchestratorConfigShape = {
  WORKER_LINK_HOST: env.string({
    doc: "Interface of the worker link's own gRPC server, which serves WorkerLink and grpc.health.v1 only (JobOrchestrator stays on the process's gRPC server). Expose it to the workers, wherever they run (Kubernetes: 0.0.0.0 behind a Service of its own).",
    default: '127.0.0.1',
  }),
  WORKER_LINK_PORT: env.port({
    doc: "Port of the worker link's own gRPC server, the one workers dial (their `ORCHESTRATOR_LINK`); 0 picks a free one (the all-in-one target does when unset, and points its workers at it).",
    default: 50052,
  }),
  WORKER_LINK_TLS_CERT_FILE: env.optionalString({
    doc: "PEM certificate chain the worker link's listener serves TLS with (with WORKER_LINK_TLS_KEY_FILE); workers dial it as `tls://host:port`, and the certificate must name that host. Unset serves plaintext, which suits only a link that stays on one machine (the all-in-one target) or inside a network you trust: anyone on the path of a plaintext link sees and can alter what a worker is sent. Read at start; a rotated certificate takes a restart.",
  }),
  WORKER_LINK_TLS_KEY_FILE: env.optionalString({
    doc: 'PEM private key of WORKER_LINK_TLS_CERT_FILE; set both or neither.',
  }),
  LINK_HEARTBEAT_INTERVAL: env.durationMs({
    doc: 'How often a linked worker must heartbeat (sent to it in the welcome).',
    default: '5s',
  }),
  LINK_PRESENCE_TTL: env.durationMs({
    doc: 'How long one heartbeat keeps a worker listed as live for every replica; a link with no heartbeat for this long is ended (`HEARTBEAT_MISSED`). A few heartbeat intervals, so one late beat does not drop a worker.',
    default: '15s',
  }),
  LINK_CHALLENGE_TTL: env.durationMs({
    doc: 'How long a worker has to sign the link challenge before the link is refused. Workers refuse to sign a challenge valid for more than 5 minutes.',
    default: '30s',
  }),
  LINK_WORKER_STATUS_CACHE_TTL: env.durationMs({
    doc: 'How long whether an address is an active registered worker (WorkerRegistry `isActive`) is remembered, so a redialling worker does not cost a chain read per dial.',
    default: '5s',
  }),
  LINK_ORCHESTRATOR_NAME: env.string({
    doc: 'How this deployment names itself in the link challenge a worker signs (so a signature is worth nothing to another service): printable ASCII, 1 to 64 characters.',
    default: 'svc job-orchestrator',
  }),

  COMPLETIONS_ENABLED: env.bool({
    doc: 'Runs completions; false answers every completion 503 `not_configured` (the worker link keeps serving).',
    default: true,
  }),
  SERVICE_SIGNER_PRIVATE_KEY: env.optionalString({
    doc: "The service's principal (32 bytes of hex, from a secret store): the delegate wallets authorize, owner of no funds of its own. Unset: completions answer 503 `not_configured`. The all-in-one target uses the devnet's service signer.",
    secret: true,
  }),
  BLOB_OPERATOR_PRIVATE_KEYS: env.list({
    doc: "Comma-separated keys of the principal's operators that send blob transactions (job submissions and reassignments); each must have accepted the principal's operator offer (`setOperator`, then `acceptOperator`). At least one is needed for completions.",
    default: [],
    secret: true,
  }),
  PLAIN_OPERATOR_PRIVATE_KEYS: env.list({
    doc: "Comma-separated keys of the principal's operators that send plain transactions (sessions, time-outs, refunds, releases, disputes). Empty: the principal sends them itself.",
    default: [],
    secret: true,
  }),
  SETTLER_ADDRESS: env.optionalString({
    doc: 'gRPC address (host:port) of the payment-settler that settles per-call payments. Unset: calls paid per call are refused `unsupported_scheme`. The all-in-one target points it at its own settler.',
  }),
  SETTLER_TIMEOUT: env.durationMs({
    doc: "How long a settlement may take at the payment-settler (its transaction is mined, or replaced until it is, before it answers): longer than the settler's own sending can take.",
    default: '5m',
  }),
  SETTLEMENT_OUTCOME_WAIT: env.durationMs({
    doc: 'How long a call paid per call keeps asking the payment-settler about a settlement whose outcome it cannot tell yet (a send still under way on a slow chain, a settler not heard) before it answers 502 `unexpected_settle_error`: as long as the settler holds the payment (its PAYMENT_RESERVATION_TTL).',
    default: '5m',
  }),
  MAX_FEE_PER_BLOB_GAS: env.wei({
    doc: 'The most paid per unit of blob gas; above it a completion answers 503 `blob_fee_too_high` before anything is signed.',
    default: 50n * 10n ** 9n,
  }),
  TX_POLL_INTERVAL: env.durationMs({
    doc: 'How often a sent transaction is looked for on chain (a quarter of the block time suits).',
    default: '250ms',
  }),
  SUBMIT_BATCH_LINGER: env.durationMs({
    doc: 'How long a batch of job submissions (one transaction, one blob) stays open for more jobs when no batch is being prepared ahead of it and the replica is busy (at least SUBMIT_BATCH_LINGER_SIBLINGS other calls waiting for their answers); otherwise it closes at once, so a call on a quiet service waits for nobody. Calls arriving while a batch is prepared share the next one whatever this is (docs/protocol.md, Batches).',
    default: '600ms',
  }),
  SUBMIT_BATCH_LINGER_SIBLINGS: env.int({
    doc: "How many other calls must be waiting for their answers on this replica before a batch lingers (SUBMIT_BATCH_LINGER), like PostgreSQL's commit_siblings: more than the replica answers at once before calls queue for its CPU, so it lingers only when holding calls back saves more than it costs.",
    default: 10,
    min: 0,
    max: 10_000,
  }),
  SUBMIT_BATCH_MAX_WAIT: env.durationMs({
    doc: 'The longest a job submission waits for its batch to close, even while the batch ahead of it is still being prepared; at least SUBMIT_BATCH_LINGER.',
    default: '600ms',
  }),
  SUBMIT_BATCH_MAX_JOBS: env.int({
    doc: 'Job submissions in one batch at most (a blob holds at most 256 prompts; a batch also closes when its blob is full).',
    default: 64,
    min: 1,
    max: 256,
  }),
  TX_REPLACE_AFTER: env.durationMs({
    doc: 'A transaction still pending this long is replaced with higher fees.',
    default: '30s',
  }),
  SESSION_OPENS_PER_MINUTE: env.int({
    doc: 'New sessions opened per minute, server-wide; beyond it a call that needs one answers 429 `session_open_limit_exceeded`.',
    default: 30,
    min: 1,
  }),
  SESSION_OPENS_UNPAID_PER_MINUTE: env.int({
    doc: 'Of SESSION_OPENS_PER_MINUTE, the new sessions per minute, server-wide, for payers (wallets, per-call payers) with no job submitted in the last day; beyond it their calls that need a new session answer 429 `session_open_limit_exceeded`, while paying wallets keep the rest of the opens.',
    default: 10,
    min: 1,
  }),
  SESSION_UNUSED_PER_WALLET: env.int({
    doc: 'Open sessions in which no job was submitted yet that one wallet (or per-call payer) may hold; one more is refused 429 `session_open_limit_exceeded` until a job is submitted in one of them or they close (SESSION_UNUSED_CLOSE).',
    default: 8,
    min: 1,
  }),
  SESSION_UNUSED_PER_KEY: env.int({
    doc: 'Open sessions in which no job was submitted yet that one API key may hold (like SESSION_UNUSED_PER_WALLET, per key).',
    default: 4,
    min: 1,
  }),
  SESSION_WARM_SPARE: env.int({
    doc: "Claimed sessions of the service kept idle per model a linked worker serves, opened ahead of demand, so no call (a new wallet's first included) waits for a session to open and be claimed; 0 opens sessions only when a call needs one.",
    default: 1,
    min: 0,
  }),
  SESSION_UNUSED_CLOSE: env.durationMs({
    doc: 'A session in which no job was ever submitted (its call left, or failed before submitting) is closed this long after its claim, instead of after SESSION_IDLE_CLOSE.',
    default: '1m',
  }),
  WORKER_TRIAL_SESSIONS: env.int({
    doc: 'New sessions a worker with no answered job on record may have in calls at once while a proven worker (one that answered) serves the model, whatever free slots it reports; it gets more once it answers.',
    default: 2,
    min: 1,
  }),
  WORKER_FAILURE_BACKOFF: env.durationMs({
    doc: 'How long a worker that failed a job (timed out, failed, never claimed its session, never delivered its committed answer) gets new sessions only when no other worker has room; each further failure in a row doubles it, an answered job ends it. Kept in the shared store, so every replica honours it.',
    default: '30s',
  }),
  WORKER_FAILURE_BACKOFF_MAX: env.durationMs({
    doc: 'The longest WORKER_FAILURE_BACKOFF.',
    default: '30m',
  }),
  SESSION_IDLE_CLOSE: env.durationMs({
    doc: "A pooled session unused this long leaves the pool and is closed, well before the chain's inactivity timeout lets anyone close it.",
    default: '10m',
  }),
  SESSION_CLAIM_POLL_INTERVAL: env.durationMs({
    doc: 'How often a new session is looked at while its worker claims it.',
    default: '100ms',
  }),
  CONVERSATION_AFFINITY_TTL: env.durationMs({
    doc: 'How long a `conversation_id` remembers the session that last served it.',
    default: '1h',
  }),
  JOB_POLL_INTERVAL: env.durationMs({
    doc: "How often a running job's state is read from the chain while its answer streams.",
    default: '250ms',
  }),
  FINAL_ANSWER_GRACE: env.durationMs({
    doc: "How long a committed job waits for the worker's final answer frame before the call fails `job_failed` (a worker re-sends its final after a broken link; under load that can take seconds).",
    default: '30s',
  }),
  FRAME_STREAM_TTL: env.durationMs({
    doc: "How long a job's answer frames stay in the store after its call ended.",
    default: '1h',
  }),
  KEEPER_INTERVAL: env.durationMs({
    doc: 'How often the job keeper (one leader across replicas) follows the logs and sweeps jobs and sessions.',
    default: '5s',
  }),
  KEEPER_CONFIRMATIONS: env.int({
    doc: 'Blocks a log must be buried under before the keeper acts on it.',
    default: 0,
    min: 0,
  }),
  DRAIN_TIMEOUT: env.durationMs({
    doc: "How long a stopping replica takes, all in all (one deadline, and a second more to free its locks): the calls it is running get it all but a third (at most 10 s), kept for recording and publishing their lifecycle events. Jobs still running then are left to the job keeper of the remaining replicas (or of the next start), events to another replica's outbox relay. The pod's grace period must exceed it, plus the bus's close (KAFKA_PUBLISH_TIMEOUT).",
    default: '30s',
  }),
  LIFECYCLE_OUTBOX_MAX_EVENTS: env.int({
    doc: "Most job lifecycle events the outbox (a queue in the shared store) holds while the bus cannot take them; when full, new calls are refused (`job_failed`, nothing spent, no event recorded) and logged at error level. Events of calls already under way are always kept, so the outbox may exceed it by those calls' remaining events. Sized for a Kafka outage: the default holds about an hour of a busy deployment's events.",
    default: 100_000,
    min: 1,
  }),
  LIFECYCLE_RELAY_BATCH_SIZE: env.int({
    doc: 'Most job lifecycle events the outbox relay publishes in one batch.',
    default: 500,
    min: 1,
  }),
  LIFECYCLE_RELAY_POLL_INTERVAL: env.durationMs({
    doc: "How often the outbox relay that holds the turn (one replica's at a time) looks for lifecycle events queued by other replicas (events queued on its own replica go out at once), and how often every other replica tries for the turn.",
    default: '1s',
  }),
  CHAIN_CACHE_TTL: env.durationMs({
    doc: 'How long the configured models and an unpaused JobRegistry are remembered between chain reads (a pause is read again on every call, so calls resume the moment it is lifted; a fee is read on every call).',
    default: '5s',
  }),
  ...serviceTokenSettings,
};

export type JobOrchestratorConfig = ConfigOf<typeof jobOrchestratorConfigShape>;

export function loadJobOrchestratorConfig(source: NodeJS.ProcessEnv = process.env): JobOrchestratorConfig {
  return loadConfig(jobOrchestratorConfigShape, source);
}
