import { env, loadConfig, serviceTokenCallerSettings, type ConfigOf } from '@svc/platform';

/**
 * Every setting of the gateway, read once from the environment at start-up (the store and bus are the
 * runner's: see @svc/runtime). Defaults run the all-in-one mode on one machine.
 */
export const gatewayConfigShape = {
  HTTP_HOST: env.string({ doc: 'Interface the HTTP server binds.', default: '0.0.0.0' }),
  PORT: env.port({ doc: 'Port of the public HTTP server (0 picks a free one).', default: 8080 }),
  HTTP_HEADERS_TIMEOUT: env.durationMs({
    doc: 'Longest a client may take to send the headers of a request before it is answered 408 and disconnected (slow-header clients). At most HTTP_REQUEST_TIMEOUT.',
    default: '20s',
  }),
  HTTP_REQUEST_TIMEOUT: env.durationMs({
    doc: 'Longest a client may take to send a whole request, body included, before it is answered 408 and disconnected. It bounds receiving the request only: a response (a long completion stream) is never cut by it.',
    default: '60s',
  }),
  HTTP_SHUTDOWN_GRACE: env.durationMs({
    doc: "How long a stopping gateway lets the requests in flight finish (completion streams included, which can take minutes) before it closes their connections; each connection closes as soon as its request is answered. Keep it 10 s under SHUTDOWN_TIMEOUT (60 s by default), for the rest of the stop: the chart sets it 15 s below the gateway's `terminationGracePeriodSeconds` (120 s by default).",
    default: '50s',
  }),
  HTTP_KEEP_ALIVE_TIMEOUT: env.durationMs({
    doc: "How long an idle keep-alive connection stays open between requests. Behind a proxy, keep it above the proxy's idle timeout (60 s for nginx and AWS ALB), so the proxy never reuses a connection the gateway is closing.",
    default: '65s',
  }),
  PUBLIC_URL: env.url({
    doc: 'URL clients reach the gateway at (behind a proxy, its public origin). Default: `http://localhost:<PORT>`.',
    protocols: ['http', 'https'],
  }),
  TRUST_PROXY: env.string({
    doc: "Which proxies' X-Forwarded-For the gateway believes when it takes a client's address (express `trust proxy`: `false`, a hop count, or comma-separated addresses, subnets or `loopback`, `linklocal`, `uniquelocal`). Required outside the all-in-one target (which trusts `loopback`): name your load balancer's addresses, since a trusted peer chooses the address per-address limits count, and behind an untrusted proxy every client shares the proxy's address.",
  }),

  KEY_SERVICE_ADDRESS: env.string({
    doc: 'host:port of the key-service gRPC server.',
    default: '127.0.0.1:50051',
  }),
  ORCHESTRATOR_ADDRESS: env.optionalString({
    doc: 'host:port of the job-orchestrator gRPC server. Unset (and no orchestrator in this process): completions answer 503 `not_configured` and no model is listed.',
  }),
  ORCHESTRATOR_TIMEOUT: env.durationMs({
    doc: 'Deadline of one model listing or fee quote from the job-orchestrator (a completion stream has none: it is cancelled when its client leaves).',
    default: '10s',
  }),
  SETTLER_ADDRESS: env.optionalString({
    doc: 'host:port of the payment-settler gRPC server. Unset (and no payment-settler in this process): the server takes no per-call payments; a `PAYMENT-SIGNATURE` is answered 400 (`unsupported_scheme` once it decodes) and a completion without an API key 401 `invalid_api_key`.',
  }),
  SETTLER_TIMEOUT: env.durationMs({
    doc: 'Deadline of one call to the payment-settler (requirements, verification, release).',
    default: '10s',
  }),
  KEY_SERVICE_TIMEOUT: env.durationMs({ doc: 'Deadline of one call to the key-service.', default: '10s' }),

  CONSOLE_DIR: env.optionalString({
    doc: "Directory of the web console's build (`index.html`, `assets/`), served at `/`. Unset: the `dist` of the `@svc/console` package (`npm run generate -w @svc/console` builds it); while it holds no `index.html`, `/` answers 404 `not_found` saying so. `off`: no console, `/` is an unknown path.",
  }),

  API_BODY_LIMIT: env.string({ doc: 'Largest JSON body the `/api` routes read.', default: '16kb' }),
  KEY_ROUTES_RATE_LIMIT: env.int({
    doc: 'Calls one wallet may make to the `/api/api-keys` routes per KEY_ROUTES_RATE_WINDOW, over all replicas.',
    default: 60,
    min: 1,
  }),
  KEY_ROUTES_RATE_WINDOW: env.durationMs({ doc: 'Window of KEY_ROUTES_RATE_LIMIT.', default: '1m' }),
  API_BAD_TOKEN_RATE_LIMIT: env.int({
    doc: 'Presented sign-in tokens that fail on the `/api/api-keys` routes (invalid, expired, malformed, an API key instead) one client address (an IPv6 client: its /64) may send per API_BAD_TOKEN_RATE_WINDOW, over all replicas, before its further failing tokens are answered 429 instead of 401. Valid tokens are served regardless; calls with no `Authorization` are not counted.',
    default: 30,
    min: 1,
  }),
  API_BAD_TOKEN_RATE_WINDOW: env.durationMs({ doc: 'Window of API_BAD_TOKEN_RATE_LIMIT.', default: '1m' }),
  SIGN_IN_RATE_LIMIT: env.int({
    doc: 'Calls one client address may make to `/api/auth/challenge` and `/api/auth/verify` together per SIGN_IN_RATE_WINDOW; as many again to `/api/chain`, counted apart.',
    default: 60,
    min: 1,
  }),
  SIGN_IN_RATE_WINDOW: env.durationMs({ doc: 'Window of SIGN_IN_RATE_LIMIT.', default: '1m' }),
  V1_BODY_LIMIT: env.string({
    doc: 'Largest JSON body `POST /v1/chat/completions` reads (whole conversations are sent; old turns are dropped later).',
    default: '4mb',
  }),
  V1_KEY_RATE_LIMIT: env.int({
    doc: 'Calls one API key may make to the `/v1` routes per V1_KEY_RATE_WINDOW, over all replicas.',
    default: 60,
    min: 1,
  }),
  V1_KEY_RATE_WINDOW: env.durationMs({ doc: 'Window of V1_KEY_RATE_LIMIT.', default: '1m' }),
  V1_KEY_CONCURRENCY_LIMIT: env.int({
    doc: 'Completions one API key may have in flight at once, over all replicas.',
    default: 4,
    min: 1,
  }),
  V1_CONCURRENCY_LEASE_TTL: env.durationMs({
    doc: 'Lifetime of an in-flight slot; renewed while its call runs, so a crashed replica frees its slots after this.',
    default: '60s',
  }),
  V1_BAD_KEY_RATE_LIMIT: env.int({
    doc: 'Presented API keys that fail (unknown, revoked, malformed) one client address (an IPv6 client: its /64) may send per V1_BAD_KEY_RATE_WINDOW before its further failing keys are answered 429 instead of 401. Good keys are served regardless; calls with no credential are not counted.',
    default: 30,
    min: 1,
  }),
  V1_BAD_KEY_RATE_WINDOW: env.durationMs({ doc: 'Window of V1_BAD_KEY_RATE_LIMIT.', default: '1m' }),
  V1_KEY_CACHE_MAX_ENTRIES: env.int({
    doc: 'Resolved API keys each replica keeps in memory (LRU); 0 resolves every call through the key-service. Revocation is checked in the shared store on every call either way.',
    default: 10_000,
    min: 0,
  }),
  V1_KEY_CACHE_TTL: env.durationMs({ doc: 'How long a resolved API key stays cached.', default: '30s' }),
  V1_SPEND_RESERVATION_TTL: env.durationMs({
    doc: "How long a completion's spend reservation holds when nobody settles it (outlives the claim window and two job timeouts).",
    default: '10m',
  }),
  V1_PAYER_RATE_LIMIT: env.int({
    doc: 'Calls paid per call without an API key that one payer may make per V1_PAYER_RATE_WINDOW, over all replicas; counted once the payment verified, before it is settled.',
    default: 30,
    min: 1,
  }),
  V1_PAYER_RATE_WINDOW: env.durationMs({ doc: 'Window of V1_PAYER_RATE_LIMIT.', default: '1m' }),
  V1_KEYLESS_RATE_LIMIT: env.int({
    doc: 'Completions without an API key (paid per call, or answered 402) that one client address (an IPv6 client: its /64) may send per V1_KEYLESS_RATE_WINDOW, over all replicas; counted before the payment-settler is asked anything (each call it answers costs chain reads), so past it the address gets 429 `rate_limit_exceeded`. Calls with an API key are not counted.',
    default: 60,
    min: 1,
  }),
  V1_KEYLESS_RATE_WINDOW: env.durationMs({ doc: 'Window of V1_KEYLESS_RATE_LIMIT.', default: '1m' }),
  V1_PAYER_CONCURRENCY_LIMIT: env.int({
    doc: "Completions paid per call without an API key that one payer may have in flight at once, over all replicas. A call with an API key beside its payment is held to the key's limits instead.",
    default: 1,
    min: 1,
  }),
  V1_PAYMENT_RESERVATION_TTL: env.durationMs({
    doc: "How long a verified per-call payment's nonce stays reserved when nobody settles or releases it (a replica died mid-call); until then the same payment cannot be sent again.",
    default: '5m',
  }),
  V1_LIMIT_HIT_FLUSH_INTERVAL: env.durationMs({
    doc: 'How often each replica sends the refusals counted in the shared store (`limitHits`) to the key-service, as one call per batch; listings show refusals at once either way (the key-service adds those still in the store). A stopping replica flushes once more.',
    default: '5s',
  }),
  V1_KEY_EVENTS_GROUP_PREFIX: env.string({
    doc: "Consumer group prefix of the key-event subscription that evicts cached keys; each replica adds its own suffix, since every replica's cache needs every event.",
    default: 'gateway-key-cache',
  }),
  READINESS_TIMEOUT: env.durationMs({
    doc: 'How long `/readyz` waits for the key-service and the store to answer.',
    default: '2s',
  }),
  ...serviceTokenCallerSettings,
};

export type GatewayConfig = ConfigOf<typeof gatewayConfigShape>;

export function loadGatewayConfig(source: NodeJS.ProcessEnv = process.env): GatewayConfig {
  return loadConfig(gatewayConfigShape, source);
}

/** Express's `trust proxy` value for the TRUST_PROXY text. */
export function trustProxySetting(text: string): boolean | number | string {
  const trimmed = text.trim();
  if (trimmed === 'true') return true;
  if (trimmed === 'false' || trimmed === '') return false;
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  return trimmed;
}
