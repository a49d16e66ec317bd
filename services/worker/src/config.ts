import { env, loadConfig, type ConfigOf } from '@svc/platform';

/**
 * Every setting of the reference worker, read once from the environment at start-up (the chain is the
 * runner's: RPC_URL and the contract addresses, see @svc/runtime). Defaults run the built-in
 * deterministic model.
 */
export const workerConfigShape = {
  HEALTH_HOST: env.string({
    doc: "Interface of the health and metrics server (`/healthz`, `/readyz`, `/metrics`; no auth). Loopback by default; a container sets 0.0.0.0 so the kubelet's probes and Prometheus reach it, and keeps the port closed to everything else (Kubernetes: a NetworkPolicy).",
    default: '127.0.0.1',
  }),
  HEALTH_PORT: env.port({
    doc: 'Port of `/healthz`, `/readyz` and `/metrics` (0 picks a free one).',
    default: 9464,
  }),

  BLOCK_TIME: env.durationMs({
    doc: 'Expected time between blocks; pending transactions are polled at a quarter of it.',
    default: '2s',
  }),
  BEACON_API_URL: env.url({
    doc: 'Beacon node for prompt blobs; unset reads them from the RPC endpoint (anvil serves the beacon blob route there).',
    protocols: ['http', 'https'],
  }),
  START_BLOCK: env.int({
    doc: 'First block to read on the very first start (later starts resume from the stored cursor); -1 means the chain head.',
    default: -1,
    min: -1,
  }),
  CONFIRMATIONS: env.int({
    doc: 'Blocks a log must be buried under before the worker acts on it.',
    default: 0,
    min: 0,
  }),
  LOG_POLL_INTERVAL: env.durationMs({ doc: 'How often the chain is asked for new logs.', default: '500ms' }),

  DATA_DIR: env.optionalString({
    doc: 'Directory of the durable state: keystore, session keys (encrypted), saved final answers, chain cursor. Default: `<STATE_DIR>/worker`.',
  }),
  WORKER_PRIVATE_KEY: env.optionalString({
    doc: "The worker's key as 32 bytes of hex (from a secret store); unset loads the encrypted keystore instead.",
    secret: true,
  }),
  KEYSTORE_PATH: env.optionalString({
    doc: 'Encrypted JSON keystore of the worker key, used when WORKER_PRIVATE_KEY is unset; created on first start. Default: `<DATA_DIR>/worker-keystore.json`.',
  }),
  KEYSTORE_PASSWORD: env.string({
    doc: 'Password of the keystore; also derives the key that encrypts session keys at rest. Never logged.',
    secret: true,
  }),
  STAKE_WEI: env.wei({
    doc: 'Stake to register with, and the level a slashed stake is topped up to.',
    default: 10n ** 17n,
  }),

  CAPACITY: env.int({ doc: 'Jobs run at once (announced as free job slots).', default: 4, min: 1 }),
  SESSION_LIMIT: env.int({
    doc: 'Sessions held open at once (announced as free session slots).',
    default: 16,
    min: 1,
  }),
  SESSION_SWEEP_INTERVAL: env.durationMs({
    doc: "How often the held sessions are checked: one idle past JobRegistry's inactivity timeout is closed and its slot freed, one closed unnoticed is forgotten.",
    default: '1m',
  }),
  MIN_RUN_TIME: env.durationMs({
    doc: 'A job with less time than this before its deadline is failed at once instead of started.',
    default: '10s',
  }),
  COMMIT_MARGIN: env.durationMs({
    doc: 'Time kept back before a job deadline for `completeJob` to be mined; generation stops there.',
    default: '6s',
  }),
  CLAIM_MARGIN: env.durationMs({
    doc: 'A session is not claimed when less than this is left of its claim window.',
    default: '2s',
  }),
  DELTA_COALESCE: env.durationMs({
    doc: 'Longest a piece of answer text is held to be sent with the next one.',
    default: '50ms',
  }),
  MAX_DELTA_CHARS: env.int({ doc: 'A delta goes out once this much text is held.', default: 512, min: 1 }),

  ORCHESTRATOR_LINK: env.optionalString({
    doc: "`host:port` of the orchestrator's worker link listener (its WORKER_LINK_HOST and WORKER_LINK_PORT, 50052 by default; not its gRPC port), or `tls://host:port` to dial it with TLS (the orchestrator's WORKER_LINK_TLS_CERT_FILE; its certificate must name the host). Use TLS whenever the link leaves the machine or the cluster. Unset serves on chain only, without streaming. The all-in-one target points it at its own orchestrator.",
  }),
  ORCHESTRATOR_LINK_CA_FILE: env.optionalString({
    doc: "PEM file of the CA (or self-signed certificate) the orchestrator's link certificate is checked against, instead of the system's CAs; needs a `tls://` ORCHESTRATOR_LINK.",
  }),
  LINK_BACKOFF_INITIAL: env.durationMs({
    doc: 'First redial delay of the worker link (doubles per failure, with jitter).',
    default: '500ms',
  }),
  LINK_BACKOFF_MAX: env.durationMs({ doc: 'Longest redial delay of the worker link.', default: '30s' }),
  HEARTBEAT_INTERVAL: env.durationMs({
    doc: 'Heartbeat period when the orchestrator names none.',
    default: '5s',
  }),

  MODEL_BACKEND: env.oneOf({
    doc: 'Where answers come from: the built-in deterministic model, or an OpenAI-compatible upstream.',
    values: ['deterministic', 'openai'] as const,
    default: 'deterministic',
  }),
  DETERMINISTIC_MODELS: env.list({
    doc: 'Model names the built-in model serves.',
    default: ['svc-deterministic'],
  }),
  DETERMINISTIC_TOKENS_PER_SECOND: env.int({
    doc: 'Speed of the built-in model (0: as fast as it can).',
    default: 50,
    min: 0,
  }),
  DETERMINISTIC_FAULT: env.optionalString({
    doc: 'A fault the built-in model applies to every job, e.g. `fail-after-chunks=3` (tests only).',
  }),
  DETERMINISTIC_FAULTS_FROM_PROMPT: env.bool({
    doc: 'Let prompts pick a fault with `#fault:<kind>[=<chunks>]` (tests only; never with real traffic).',
    default: false,
  }),
  UPSTREAM_URL: env.url({
    doc: 'Base URL of the OpenAI-compatible upstream, `/v1` included (Ollama: http://127.0.0.1:11434/v1).',
    protocols: ['http', 'https'],
  }),
  UPSTREAM_API_KEY: env.optionalString({
    doc: 'Bearer token for the upstream, if it needs one.',
    secret: true,
  }),
  UPSTREAM_MODEL_MAP: env.list({
    doc: 'Served model name = upstream model name pairs, e.g. `llama3.2:1b=llama3.2:1b-instruct`; a bare name maps to itself.',
    default: [],
  }),
  UPSTREAM_RESPONSE_TIMEOUT: env.durationMs({
    doc: 'Longest wait for the upstream to start answering.',
    default: '30s',
  }),
  UPSTREAM_IDLE_TIMEOUT: env.durationMs({
    doc: 'Longest silence of a streaming upstream answer.',
    default: '60s',
  }),

  RELEASE_INTERVAL: env.durationMs({
    doc: 'How often completed jobs past the dispute window are released and earnings checked.',
    default: '5m',
  }),
  WITHDRAW_THRESHOLD_WEI: env.wei({
    doc: 'Earnings are withdrawn once they reach this much.',
    default: 10n ** 16n,
  }),
  DRAIN_TIMEOUT: env.durationMs({
    doc: 'Longest a SIGTERM waits for jobs in flight before stopping them.',
    default: '2m',
  }),
};

export type WorkerConfig = ConfigOf<typeof workerConfigShape>;

export function loadWorkerConfig(source: NodeJS.ProcessEnv = process.env): WorkerConfig {
  return loadConfig(workerConfigShape, source);
}

/** `name=upstream` pairs (a bare name maps to itself) as a served-name → upstream-name map. */
export function parseModelMap(pairs: readonly string[]): Record<string, string> {
  const map: Record<string, string> = {};
  for (const pair of pairs) {
    const separator = pair.indexOf('=');
    const served = (separator < 0 ? pair : pair.slice(0, separator)).trim();
    const upstream = (separator < 0 ? pair : pair.slice(separator + 1)).trim();
    if (!served || !upstream) throw new RangeError(`UPSTREAM_MODEL_MAP entry "${pair}" is not name=upstream`);
    map[served] = upstream;
  }
  return map;
}
