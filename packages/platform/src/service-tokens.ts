import { sign, type KeyObject } from 'node:crypto';
import { GrpcStatus, METADATA, RpcError, type CallAuthenticator, type CallCredentials } from '@svc/proto';
import { errors as joseErrors, jwtVerify, type JWTHeaderParameters } from 'jose';
import { SERVICE_CALL_GRANTS } from './service-call-grants.js';
import {
  CALLER_NAME,
  parseServiceTokenPrivateKey,
  parseServiceTokenPublicKey,
  serviceTokenKeyId,
  type ServiceName,
  type ServiceTokenServerConfig,
} from './service-token-keys.js';

// Service tokens: every gRPC call from one of the services to another (or from an internal caller of the
// deploying team) carries a short-lived JWT signed with the caller's own Ed25519 key (EdDSA), naming the
// caller (`iss`) and the service called (`aud`); the called service holds only public keys, checks the
// token before any handler runs, then checks that this caller may call this method. See
// docs/architecture.md, "Calls between the services".

/** The JWT `typ` of a service token, so no other token signed with the same key passes for one. */
export const SERVICE_TOKEN_TYPE = 'svc-service+jwt';
/** The JWS algorithm of service tokens: Ed25519. */
export const SERVICE_TOKEN_ALGORITHM = 'EdDSA';
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

function base64url(value: object): string {
  return Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');
}

/**
 * A caller (a service, or an internal caller of the deploying team) with its own private key: the
 * `authorization` value of its calls to each service, a token minted once and reused until half its
 * life is gone, so a call costs a map lookup, never a signature.
 */
export class ServiceIdentity {
  readonly #kid: string;
  readonly #key: KeyObject;
  readonly #now: () => number;
  readonly #tokens = new Map<ServiceName, { readonly authorization: string; readonly renewAt: number }>();

  /** `privateKey`: SERVICE_TOKEN_PRIVATE_KEY's value (PKCS#8 Ed25519, PEM or its base64 body). */
  constructor(
    readonly name: string,
    privateKey: string | KeyObject,
    options: { readonly now?: () => number } = {},
  ) {
    if (!CALLER_NAME.test(name)) throw new Error(`${JSON.stringify(name)} is no caller name (a-z, 0-9, -)`);
    this.#key = typeof privateKey === 'string' ? parseServiceTokenPrivateKey(privateKey) : privateKey;
    this.#kid = serviceTokenKeyId(this.#key);
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
    const header = base64url({ alg: SERVICE_TOKEN_ALGORITHM, typ: SERVICE_TOKEN_TYPE, kid: this.#kid });
    const claims = base64url({ iss: this.name, aud: audience, iat: issuedAt, exp: expires });
    const signingInput = `${header}.${claims}`;
    const signature = sign(null, Buffer.from(signingInput, 'utf8'), this.#key).toString('base64url');
    const authorization = `Bearer ${signingInput}.${signature}`;
    this.#tokens.set(audience, { authorization, renewAt: expires * 1000 - RENEW_BEFORE_EXPIRY_MS });
    return authorization;
  }
}

/** A gRPC service as its generated descriptor describes it (`KeyService`, `PaymentSettler`, …). */
export interface GrpcServiceDescriptor {
  readonly name: string;
  readonly typeName: string;
  readonly methods: readonly { readonly name: string }[];
}

export interface ServiceCallersOptions {
  /** The service called: tokens must name it as their audience. */
  readonly service: ServiceName;
  /** The gRPC service the authenticator guards: grants name its methods. */
  readonly grpcService: GrpcServiceDescriptor;
  /** The clock (tests). */
  readonly now?: () => number;
}

class Refusal extends Error {}

/** The public keys a service accepts, by `kid`, each with the callers it may sign for. */
interface KnownKey {
  readonly key: KeyObject;
  readonly callers: ReadonlySet<string>;
}

/**
 * Which caller may call which method of `grpcService`: the services' own calls (SERVICE_CALL_GRANTS)
 * and the internal callers' (SERVICE_TOKEN_INTERNAL_CALLERS). A grant naming a method the service does
 * not have is a mistake in the settings (or the table), refused at start rather than ignored.
 */
export function methodGrants(
  config: ServiceTokenServerConfig,
  grpcService: GrpcServiceDescriptor,
): ReadonlyMap<string, ReadonlySet<string>> {
  const prefix = `${grpcService.name}.`;
  const methods = new Set(grpcService.methods.map((method) => method.name));
  const grants = new Map<string, Set<string>>();
  const grant = (caller: string, granted: readonly string[]) => {
    for (const qualified of granted) {
      if (!qualified.startsWith(prefix)) continue;
      const method = qualified.slice(prefix.length);
      if (!methods.has(method))
        throw new Error(`${caller} is granted ${qualified}, which ${grpcService.typeName} does not have`);
      let set = grants.get(caller);
      if (set === undefined) grants.set(caller, (set = new Set()));
      set.add(method);
    }
  };
  for (const [caller, granted] of Object.entries(SERVICE_CALL_GRANTS)) grant(caller, granted);
  for (const caller of config.SERVICE_TOKEN_INTERNAL_CALLERS ?? []) grant(caller.name, caller.methods);
  return grants;
}

/**
 * The authenticator of a service's gRPC calls (GrpcServer `add`'s `access`): a service token for
 * `service`, signed with one of the key pairs of the caller it names (SERVICE_TOKEN_CALLER_KEYS, or an
 * internal caller's in SERVICE_TOKEN_INTERNAL_CALLERS), not expired, else UNAUTHENTICATED saying why;
 * then the method called must be granted to that caller, else PERMISSION_DENIED. Returns the caller's
 * name. A token verified once is remembered until it expires, so a caller's many calls cost one
 * verification.
 */
export function serviceCallers(
  config: ServiceTokenServerConfig,
  options: ServiceCallersOptions,
): CallAuthenticator {
  const keys = new Map<string, { key: KeyObject; callers: Set<string> }>();
  const accept = (caller: string, publicKey: string) => {
    const key = parseServiceTokenPublicKey(publicKey);
    const kid = serviceTokenKeyId(key);
    const known = keys.get(kid);
    if (known) known.callers.add(caller);
    else keys.set(kid, { key, callers: new Set([caller]) });
  };
  for (const { caller, publicKey } of config.SERVICE_TOKEN_CALLER_KEYS) accept(caller, publicKey);
  for (const caller of config.SERVICE_TOKEN_INTERNAL_CALLERS ?? [])
    for (const publicKey of caller.publicKeys) accept(caller.name, publicKey);
  const grants = methodGrants(config, options.grpcService);
  const now = options.now ?? Date.now;
  const verified = new Map<string, { readonly caller: string; readonly until: number }>();

  const verify = async (token: string): Promise<string> => {
    let signer: KnownKey | undefined;
    const keyOf = (header: JWTHeaderParameters): KeyObject => {
      signer = header.kid === undefined ? undefined : keys.get(header.kid);
      if (signer === undefined) throw new Refusal('signed with a key this service does not know');
      return signer.key;
    };
    try {
      const { payload } = await jwtVerify(token, keyOf, {
        algorithms: [SERVICE_TOKEN_ALGORITHM],
        typ: SERVICE_TOKEN_TYPE,
        audience: options.service,
        requiredClaims: ['iss', 'aud', 'iat', 'exp'],
        maxTokenAge: MAX_TOKEN_AGE_S,
        clockTolerance: CLOCK_TOLERANCE_S,
        currentDate: new Date(now()),
      });
      const caller = payload.iss!;
      // The key is bound to its caller: the gateway's key cannot sign for the job-orchestrator.
      if (!signer!.callers.has(caller))
        throw new Refusal(
          `signed with a key of ${[...signer!.callers].join(', ')}, not of ${printable(caller)}`,
        );
      const until = (Math.min(payload.exp!, payload.iat! + MAX_TOKEN_AGE_S) + CLOCK_TOLERANCE_S) * 1000;
      if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value as string);
      verified.set(token, { caller, until });
      return caller;
    } catch (error) {
      throw refused(reasonOf(error, options.service));
    }
  };

  const authorize = (caller: string, call: CallCredentials): string => {
    if (grants.get(caller)?.has(call.method.name)) return caller;
    throw new RpcError(
      GrpcStatus.PERMISSION_DENIED,
      `service token refused: ${caller} may not call ${options.grpcService.name}.${call.method.name}`,
    );
  };

  return (call: CallCredentials) => {
    const sent = call.metadata.get(METADATA.authorization)[0];
    if (typeof sent !== 'string' || sent === '') throw refused('no service token');
    const match = /^Bearer +(\S+)$/i.exec(sent);
    if (!match) throw refused('not a bearer token');
    const token = match[1]!;
    const known = verified.get(token);
    if (known !== undefined) {
      if (now() < known.until) return authorize(known.caller, call);
      verified.delete(token);
    }
    return verify(token).then((caller) => authorize(caller, call));
  };
}

function printable(name: unknown): string {
  return typeof name === 'string' && CALLER_NAME.test(name) ? name : 'the caller it names';
}

function refused(reason: string): RpcError {
  return new RpcError(GrpcStatus.UNAUTHENTICATED, `service token refused: ${reason}`);
}

function reasonOf(error: unknown, service: ServiceName): string {
  if (error instanceof Refusal) return error.message;
  if (error instanceof joseErrors.JWTExpired) return 'expired';
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    if (error.claim === 'aud') return `not for ${service}`;
    if (error.claim === 'iat') return 'too old, or issued in the future';
    return `claim ${error.claim} ${error.reason}`;
  }
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return 'bad signature';
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return 'algorithm not accepted';
  return 'malformed';
}
