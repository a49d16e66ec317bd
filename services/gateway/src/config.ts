import { env, loadConfig, type ConfigOf } from '@svc/platform';

/**
 * Every setting of the gateway, read once from the environment at start-up. Defaults run the all-in-one
 * mode on one machine.
 */
export const gatewayConfigShape = {
  HTTP_HOST: env.string({ doc: 'Interface the HTTP server binds.', default: '0.0.0.0' }),
  HTTP_PORT: env.port({ doc: 'Port of the public HTTP server (0 picks a free one).', default: 8080 }),
  LOG_LEVEL: env.oneOf({
    doc: 'Least severe log level written.',
    values: ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const,
    default: 'info',
  }),
  TRUST_PROXY: env.string({
    doc: "Which proxies' X-Forwarded-For the gateway believes when it takes a client's address (express `trust proxy`: `false`, a hop count, or comma-separated addresses, subnets or `loopback`, `linklocal`, `uniquelocal`).",
    default: 'loopback, linklocal, uniquelocal',
  }),

  KEY_SERVICE_ADDRESS: env.string({
    doc: 'host:port of the key-service gRPC server.',
    default: '127.0.0.1:50051',
  }),
  KEY_SERVICE_TIMEOUT: env.durationMs({ doc: 'Deadline of one call to the key-service.', default: '10s' }),

  REDIS_URL: env.url({
    doc: 'Redis shared by every gateway replica (rate windows); unset uses an in-memory store (all-in-one mode only).',
    protocols: ['redis', 'rediss'],
    secret: true,
  }),
  STORE_NAMESPACE: env.string({
    doc: 'Key prefix of the shared store; every service of one deployment uses the same one.',
    default: 'svc',
  }),

  API_BODY_LIMIT: env.string({ doc: 'Largest JSON body the `/api` routes read.', default: '16kb' }),
  KEY_ROUTES_RATE_LIMIT: env.int({
    doc: 'Calls one wallet may make to the `/api/api-keys` routes per KEY_ROUTES_RATE_WINDOW, over all replicas.',
    default: 60,
    min: 1,
  }),
  KEY_ROUTES_RATE_WINDOW: env.durationMs({ doc: 'Window of KEY_ROUTES_RATE_LIMIT.', default: '1m' }),
  SIGN_IN_RATE_LIMIT: env.int({
    doc: 'Calls one client address may make to `/api/auth/challenge` and `/api/auth/verify` together per SIGN_IN_RATE_WINDOW.',
    default: 60,
    min: 1,
  }),
  SIGN_IN_RATE_WINDOW: env.durationMs({ doc: 'Window of SIGN_IN_RATE_LIMIT.', default: '1m' }),
  READINESS_TIMEOUT: env.durationMs({
    doc: 'How long `/readyz` waits for the key-service and the store to answer.',
    default: '2s',
  }),
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
