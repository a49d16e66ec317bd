import { env, loadConfig, serviceTokenServerSettings, type ConfigOf } from '@svc/platform';

/**
 * Every setting of the key-service, read once from the environment at start-up (the database, store,
 * bus and gRPC server are the runner's: see @svc/runtime). What is only safe on a laptop has no default
 * (the sign-in domain, URI and chain, the token signing key, the key pepper): the all-in-one target
 * supplies those, every other deployment sets them. docs/configuration.md is generated from this shape.
 */
export const keyServiceConfigShape = {
  DATABASE_POOL_SIZE: env.int({
    doc: 'Most PostgreSQL connections this replica opens.',
    default: 10,
    min: 1,
  }),
  RUN_MIGRATIONS: env.bool({
    doc: 'Apply pending migrations at start (under an advisory lock, so replicas may all do it).',
    default: true,
  }),
  SIWE_DOMAIN: env.string({
    doc: "RFC 3986 authority the sign-in message names and verification requires: the host users sign in at (the gateway's public host, e.g. `api.example.com`). Required; the all-in-one target derives it from PUBLIC_URL.",
  }),
  SIWE_URI: env.url({
    doc: "URI the sign-in message names and verification requires (the gateway's public URL). Required; the all-in-one target derives it from PUBLIC_URL.",
    required: true,
  }),
  CHAIN_ID: env.int({
    doc: "EIP-155 chain id the sign-in message is bound to: the chain the wallets use. Required; the all-in-one target takes its chain's.",
    min: 1,
  }),
  SIWE_STATEMENT: env.string({
    doc: 'Human-readable statement of the sign-in message.',
    default: 'Sign in to manage API keys',
  }),
  SIWE_CHALLENGE_TTL: env.durationMs({ doc: 'How long a sign-in nonce stays usable.', default: '5m' }),
  SIWE_CLOCK_SKEW: env.durationMs({
    doc: "Tolerance for the signer's clock on issued-at, expiration and not-before.",
    default: '60s',
  }),

  SIGNIN_TOKEN_ISSUER: env.string({ doc: '`iss` of sign-in tokens.', default: 'svc-key-service' }),
  SIGNIN_TOKEN_AUDIENCE: env.string({ doc: '`aud` of sign-in tokens.', default: 'svc-api' }),
  SIGNIN_TOKEN_TTL: env.durationMs({ doc: 'Lifetime of a sign-in token.', default: '1h' }),
  SIGNIN_TOKEN_SIGNING_KEY: env.string({
    doc: 'Private key that signs new sign-in tokens: an EC P-256 or Ed25519 JWK (JSON, with `kid`) or a PKCS#8 PEM. Required, and the same on every replica (a token signed by one must verify on all). The all-in-one target generates one under STATE_DIR.',
    secret: true,
  }),
  SIGNIN_TOKEN_SIGNING_KEY_ID: env.optionalString({
    doc: '`kid` of SIGNIN_TOKEN_SIGNING_KEY when it is a PEM (a JWK carries its own).',
  }),
  SIGNIN_TOKEN_VERIFICATION_KEYS: env.optionalString({
    doc: 'Older public keys still accepted during a rotation: a JWK Set (JSON) whose keys each carry `kid` and `alg`.',
  }),

  API_KEY_PEPPER: env.string({
    doc: 'Secret mixed into stored key hashes (HMAC-SHA-256), at least 32 characters, so a leaked table alone cannot confirm a guessed key. Required; set it before the first key is minted: changing it invalidates every key. The all-in-one target generates one under STATE_DIR.',
    secret: true,
    minLength: 32,
  }),
  MAX_ACTIVE_KEYS_PER_WALLET: env.int({ doc: 'Active keys one wallet may hold.', default: 25, min: 1 }),

  RESERVATION_DEFAULT_TTL: env.durationMs({
    doc: 'Lifetime of a spend reservation whose caller sets none.',
    default: '10m',
  }),
  RESERVATION_MAX_TTL: env.durationMs({ doc: 'Longest lifetime a caller may ask for.', default: '1h' }),
  RESERVATION_SWEEP_INTERVAL: env.durationMs({
    doc: 'How often lapsed reservations are released.',
    default: '15s',
  }),
  LIMIT_HIT_REPORT_RETENTION: env.durationMs({
    doc: 'How long request ids of limit-hit reports are kept to drop repeated reports.',
    default: '24h',
  }),
  OUTBOX_POLL_INTERVAL: env.durationMs({
    doc: 'How often the outbox relay looks for unpublished key events (it is also woken after each change).',
    default: '1s',
  }),
  OUTBOX_RETENTION: env.durationMs({
    doc: 'How long published key events stay in the outbox table before they are pruned.',
    default: '168h',
  }),
  OUTBOX_BATCH_SIZE: env.int({ doc: 'Most key events one relay pass publishes.', default: 100, min: 1 }),
  LIFECYCLE_CONSUMER_GROUP: env.string({
    doc: 'Consumer group that settles reservations from job lifecycle events.',
    default: 'key-service.spend-settlement',
  }),
  ...serviceTokenServerSettings,
};

export type KeyServiceConfig = ConfigOf<typeof keyServiceConfigShape>;

export function loadKeyServiceConfig(source: NodeJS.ProcessEnv = process.env): KeyServiceConfig {
  return loadConfig(keyServiceConfigShape, source);
}
