import { createHash, createHmac, createSecretKey, webcrypto, type KeyObject } from 'node:crypto';
import { GrpcStatus, METADATA, RpcError, type CallAuthenticator, type CallCredentials } from '@svc/proto';
import { errors as joseErrors, jwtVerify, type JWTHeaderParameters } from 'jose';
import { InvalidValue, type ConfigField } from './config/fields.js';

// Service tokens: every gRPC call from one of the services to another carries a short-lived JWT (HS256
// over a secret the services share) naming the caller (`iss`) and the service called (`aud`); the called
// service checks it before any handler runs. See docs/architecture.md, "Calls between the services".

/** The services that call each other over gRPC; each one's name is its target's. */
export type ServiceName = 'gateway' | 'key-service' | 'job-orchestrator' | 'payment-settler';

/** The JWT `typ` of a service token, so no other token signed with the same secret passes for one. */
export const SERVICE_TOKEN_TYPE = 'svc-service+jwt';
/** How long a service token is valid. */
export const SERVICE_TOKEN_LIFETIME_MS = 60_000;
/** A caller replaces its token once less than this is left, so a token on its way never expires. */
const RENEW_BEFORE_EXPIRY_MS = 30_000;
/** How far the callee's clock may be ahead of the caller's. */
const CLOCK_TOLERANCE_S = 30;
/** Tokens older than this are refused whatever their `exp` says. */
const MAX_TOKEN_AGE_S = 120;
/** Most verified tokens a callee remembers (a caller replica holds one per callee at a time). */
const VERIFIED_CACHE_SIZE = 1024;
const MIN_SECRET_BYTES = 32;

function checkSecret(raw: string): string {
  if (Buffer.byteLength(raw, 'utf8') < MIN_SECRET_BYTES)
    throw new InvalidValue(`must be at least ${MIN_SECRET_BYTES} bytes`);
  if (/[\s,]/.test(raw)) throw new InvalidValue('must hold no spaces or commas');
  return raw;
}

const secretField: ConfigField<string> = {
  doc: `Shared secret of the service tokens (HS256) that authenticate the gRPC calls between the services: it signs the token each call this service makes to another carries, and verifies the tokens of the calls this service serves. At least ${MIN_SECRET_BYTES} bytes with no spaces or commas (\`openssl rand -base64 48\`), the same on every service and replica of a deployment. Required; the all-in-one target derives one under STATE_DIR. Rotation: docs/architecture.md.`,
  defaultText: undefined,
  required: true,
  secret: true,
  parse: (raw) => {
    const value = raw?.trim();
    if (value === undefined || value === '') throw new InvalidValue('is required');
    return checkSecret(value);
  },
};

const verificationSecretsField: ConfigField<readonly string[]> = {
  doc: 'Other secrets whose service tokens are also accepted (comma-separated, each as SERVICE_TOKEN_SECRET), never used to sign: the next secret before every caller signs with it, then the previous one until every caller stopped signing with it (docs/architecture.md says the order).',
  defaultText: undefined,
  required: false,
  secret: true,
  parse: (raw) =>
    (raw ?? '')
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean)
      .map(checkSecret),
};

/** The settings of a service that only calls others (the gateway). */
export const serviceTokenCallerSettings = { SERVICE_TOKEN_SECRET: secretField };
/** The settings of a service that serves gRPC to the others (and may call some). */
export const serviceTokenSettings = {
  SERVICE_TOKEN_SECRET: secretField,
  SERVICE_TOKEN_VERIFICATION_SECRETS: verificationSecretsField,
};

export interface ServiceTokenSecrets {
  readonly SERVICE_TOKEN_SECRET: string;
  readonly SERVICE_TOKEN_VERIFICATION_SECRETS?: readonly string[];
}

/** The id tokens name a secret by: a fingerprint, from which the secret cannot be read back. */
function keyIdOf(secret: string): string {
  return createHash('sha256').update(`svc-service-token:${secret}`).digest('base64url').slice(0, 16);
}

/**
 * A secret as the WebCrypto key jose verifies with, imported once: handed a KeyObject or bytes, jose
 * imports the key again on every verification, which doubles its cost.
 */
function verificationKey(secret: string): Promise<webcrypto.CryptoKey> {
  return webcrypto.subtle.importKey(
    'raw',
    Buffer.from(secret, 'utf8'),
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['verify'],
  );
}

function base64url(value: object): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/**
 * A service as a caller: the `authorization` value of its calls to each other service, a token minted
 * once and reused until half its life is gone, so a call costs a map lookup, never a signature.
 */
export class ServiceIdentity {
  readonly #kid: string;
  readonly #key: KeyObject;
  readonly #now: () => number;
  readonly #tokens = new Map<ServiceName, { readonly authorization: string; readonly renewAt: number }>();

  constructor(
    readonly name: ServiceName,
    secret: string,
    options: { readonly now?: () => number } = {},
  ) {
    this.#kid = keyIdOf(checkSecret(secret));
    this.#key = createSecretKey(Buffer.from(secret, 'utf8'));
    this.#now = options.now ?? Date.now;
  }

  /** `Bearer <token>` for a call to `audience`. */
  authorization(audience: ServiceName): string {
    const now = this.#now();
    const kept = this.#tokens.get(audience);
    if (kept !== undefined && now < kept.renewAt) return kept.authorization;
    const issuedAt = Math.floor(now / 1000);
    const expires = issuedAt + SERVICE_TOKEN_LIFETIME_MS / 1000;
    // Signed here (node:crypto, synchronous) because call metadata is made synchronously; the callee
    // verifies with jose.
    const header = base64url({ alg: 'HS256', typ: SERVICE_TOKEN_TYPE, kid: this.#kid });
    const claims = base64url({ iss: this.name, aud: audience, iat: issuedAt, exp: expires });
    const signingInput = `${header}.${claims}`;
    const signature = createHmac('sha256', this.#key).update(signingInput).digest('base64url');
    const authorization = `Bearer ${signingInput}.${signature}`;
    this.#tokens.set(audience, { authorization, renewAt: expires * 1000 - RENEW_BEFORE_EXPIRY_MS });
    return authorization;
  }
}

export interface ServiceCallersOptions {
  /** The service called: tokens must name it as their audience. */
  readonly service: ServiceName;
  /** The services that may call it: tokens must name one of them as their issuer. */
  readonly callers: readonly ServiceName[];
  /** The clock (tests). */
  readonly now?: () => number;
}

class Refusal extends Error {}

/**
 * The authenticator of a service's gRPC calls (GrpcServer `add`'s `access`): a service token signed with
 * SERVICE_TOKEN_SECRET or one of SERVICE_TOKEN_VERIFICATION_SECRETS, for `service`, from one of
 * `callers`, not expired; the caller's name, or UNAUTHENTICATED saying why. A token verified once is
 * remembered until it expires, so a caller's many calls cost one verification.
 */
export function serviceCallers(
  secrets: ServiceTokenSecrets,
  options: ServiceCallersOptions,
): CallAuthenticator {
  const keys = new Map(
    [secrets.SERVICE_TOKEN_SECRET, ...(secrets.SERVICE_TOKEN_VERIFICATION_SECRETS ?? [])].map(
      (secret) => [keyIdOf(checkSecret(secret)), verificationKey(secret)] as const,
    ),
  );
  const now = options.now ?? Date.now;
  const callers = [...options.callers];
  const verified = new Map<string, { readonly caller: string; readonly until: number }>();
  const keyOf = (header: JWTHeaderParameters): Promise<webcrypto.CryptoKey> => {
    const key = header.kid === undefined ? undefined : keys.get(header.kid);
    if (key === undefined) throw new Refusal('signed with a secret this service does not know');
    return key;
  };

  const verify = async (token: string): Promise<string> => {
    try {
      const { payload } = await jwtVerify(token, keyOf, {
        algorithms: ['HS256'],
        typ: SERVICE_TOKEN_TYPE,
        audience: options.service,
        issuer: callers,
        requiredClaims: ['iss', 'aud', 'iat', 'exp'],
        maxTokenAge: MAX_TOKEN_AGE_S,
        clockTolerance: CLOCK_TOLERANCE_S,
        currentDate: new Date(now()),
      });
      const caller = payload.iss as string;
      const until = (Math.min(payload.exp!, payload.iat! + MAX_TOKEN_AGE_S) + CLOCK_TOLERANCE_S) * 1000;
      if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value as string);
      verified.set(token, { caller, until });
      return caller;
    } catch (error) {
      throw refused(reasonOf(error, options.service));
    }
  };

  return ({ metadata }: CallCredentials) => {
    const sent = metadata.get(METADATA.authorization)[0];
    if (typeof sent !== 'string' || sent === '') throw refused('no service token');
    const match = /^Bearer +(\S+)$/i.exec(sent);
    if (!match) throw refused('not a bearer token');
    const token = match[1]!;
    const known = verified.get(token);
    if (known !== undefined) {
      if (now() < known.until) return known.caller;
      verified.delete(token);
    }
    return verify(token);
  };
}

function refused(reason: string): RpcError {
  return new RpcError(GrpcStatus.UNAUTHENTICATED, `service token refused: ${reason}`);
}

function reasonOf(error: unknown, service: ServiceName): string {
  if (error instanceof Refusal) return error.message;
  if (error instanceof joseErrors.JWTExpired) return 'expired';
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    if (error.claim === 'aud') return `not for ${service}`;
    if (error.claim === 'iss') {
      const issuer = error.payload.iss;
      return typeof issuer === 'string' && /^[a-z-]{1,40}$/.test(issuer)
        ? `${issuer} may not call ${service}`
        : `its issuer may not call ${service}`;
    }
    if (error.claim === 'iat') return 'too old, or issued in the future';
    return `claim ${error.claim} ${error.reason}`;
  }
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'bad signature';
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return 'algorithm not accepted';
  return 'malformed';
}
