import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
} from 'node:crypto';
import { InvalidValue, type ConfigField } from './config/fields.js';

// The keys and settings of service tokens: each calling service signs with an Ed25519 private key of its
// own, and a called service holds only public keys, each bound to the one caller it names. See
// docs/architecture.md, "Calls between the services".

/** The services that call each other over gRPC; each one's name is its target's. */
export type ServiceName = 'gateway' | 'key-service' | 'job-orchestrator' | 'payment-settler';

export const SERVICE_NAMES: readonly ServiceName[] = [
  'gateway',
  'key-service',
  'job-orchestrator',
  'payment-settler',
];

/** A caller's name as tokens carry it in `iss`: a service, or an internal caller of the deploying team. */
const CALLER_NAME = /^[a-z][a-z0-9-]{0,39}$/;

/** The gRPC services the services serve to callers holding a service token, by their proto name. */
export const GRPC_SERVICES_WITH_TOKENS = ['KeyService', 'JobOrchestrator', 'PaymentSettler'] as const;

/** A method of one of them as grants name it: `JobOrchestrator.RunCompletion`. */
const GRANTED_METHOD = /^(KeyService|JobOrchestrator|PaymentSettler)\.[A-Z][A-Za-z0-9]{0,63}$/;

/** The one-line base64 body of a PEM, or the PEM itself: keys fit in one environment variable either way. */
function derOf(raw: string, label: string): Buffer {
  const body = raw
    .replace(new RegExp(`-----(BEGIN|END) ${label}-----`, 'g'), '')
    .replace(/\\n/g, '')
    .replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/_-]+=*$/.test(body)) throw new InvalidValue(`must be a ${label} in PEM or base64`);
  return Buffer.from(body, body.includes('-') || body.includes('_') ? 'base64url' : 'base64');
}

/** An Ed25519 private key, PKCS#8 (`openssl genpkey -algorithm ed25519`), as PEM or its base64 body. */
export function parseServiceTokenPrivateKey(raw: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: derOf(raw, 'PRIVATE KEY'), format: 'der', type: 'pkcs8' });
  } catch (error) {
    if (error instanceof InvalidValue) throw error;
    throw new InvalidValue('must be a PKCS#8 private key (PEM or its base64 body)');
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new InvalidValue('must be an Ed25519 key');
  return key;
}

/** An Ed25519 public key, SPKI (`openssl pkey -pubout`), as PEM or its one-line base64 body. */
export function parseServiceTokenPublicKey(raw: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPublicKey({ key: derOf(raw, 'PUBLIC KEY'), format: 'der', type: 'spki' });
  } catch (error) {
    if (error instanceof InvalidValue) throw error;
    throw new InvalidValue('must be an SPKI public key (PEM or its base64 body)');
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new InvalidValue('must be an Ed25519 key');
  return key;
}

/** A public key as settings write it: the base64 body of its SPKI PEM, one line. */
export function publicKeyText(key: KeyObject): string {
  const publicKey = key.type === 'private' ? createPublicKey(key) : key;
  return publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
}

/** The `kid` tokens name a key pair by: a fingerprint of its public key. */
export function serviceTokenKeyId(key: KeyObject): string {
  const publicKey = key.type === 'private' ? createPublicKey(key) : key;
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return createHash('sha256').update(der).digest('base64url').slice(0, 16);
}

/** A fresh key pair, each half as settings take it (the base64 bodies of its PKCS#8 and SPKI PEMs). */
export function generateServiceTokenKeyPair(): { readonly privateKey: string; readonly publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKey: privateKey.export({ type: 'pkcs8', format: 'der' }).toString('base64'),
    publicKey: publicKeyText(publicKey),
  };
}

/** One public key a called service accepts, and the caller whose tokens it verifies. */
export interface CallerKey {
  readonly caller: string;
  /** The base64 body of its SPKI PEM. */
  readonly publicKey: string;
}

/** An internal caller of the deploying team: its name, its public keys, the methods it may call. */
export interface InternalCaller {
  readonly name: string;
  readonly publicKeys: readonly string[];
  /** `<gRPC service>.<method>`, e.g. `JobOrchestrator.RunCompletion`. */
  readonly methods: readonly string[];
}

function checkCallerName(name: string, what: string): string {
  if (!CALLER_NAME.test(name))
    throw new InvalidValue(`${what} ${JSON.stringify(name.slice(0, 40))} is no name (a-z, 0-9, -)`);
  return name;
}

const privateKeyField: ConfigField<string> = {
  doc: "This service's own Ed25519 private key for service tokens: it signs the token each gRPC call this service makes to another carries. PKCS#8 as PEM or its one-line base64 body (`openssl genpkey -algorithm ed25519`); its public key goes into SERVICE_TOKEN_CALLER_KEYS of the services it calls. One per service (the gateway's and the job-orchestrator's differ), the same on every replica. Required; the all-in-one target generates one per service under STATE_DIR. Rotation: docs/operations.md.",
  defaultText: undefined,
  required: true,
  secret: true,
  parse: (raw) => {
    const value = raw?.trim();
    if (value === undefined || value === '') throw new InvalidValue('is required');
    parseServiceTokenPrivateKey(value);
    return value;
  },
};

const callerKeysField: ConfigField<readonly CallerKey[]> = {
  doc: 'Public keys of the services that call this one: comma-separated `<service>=<key>` entries (`gateway=MCowBQYDK2VwAyEA…`), each key an Ed25519 SPKI public key as the one-line base64 body of its PEM (`openssl pkey -pubout`); a token is accepted only if the key that verifies it is one of the key pairs of the caller it names. Several entries for one service during a rotation. What each service may call is fixed by the code (docs/architecture.md); internal callers are SERVICE_TOKEN_INTERNAL_CALLERS. Required; the all-in-one target generates the keys under STATE_DIR.',
  defaultText: undefined,
  required: true,
  secret: false,
  parse: (raw) => {
    const entries = (raw ?? '')
      .split(',')
      .map((item) => item.trim())
      .filter(Boolean);
    if (entries.length === 0) throw new InvalidValue('is required');
    return entries.map((entry) => {
      const at = entry.indexOf('=');
      if (at < 0) throw new InvalidValue('must be <service>=<public key> entries');
      const caller = entry.slice(0, at).trim();
      if (!(SERVICE_NAMES as readonly string[]).includes(caller))
        throw new InvalidValue(
          `names ${JSON.stringify(caller.slice(0, 40))}, not a service (internal callers are SERVICE_TOKEN_INTERNAL_CALLERS)`,
        );
      return { caller, publicKey: publicKeyText(parseServiceTokenPublicKey(entry.slice(at + 1))) };
    });
  },
};

const internalCallersField: ConfigField<readonly InternalCaller[]> = {
  doc: 'Internal callers of the deploying team that call the gRPC APIs directly, as a JSON list: `[{"name":"reports","publicKeys":["MCowBQYDK2VwAyEA…"],"methods":["JobOrchestrator.RunCompletion"]}]`. Each has its own name (its tokens\' `iss`, not a service\'s), its Ed25519 public keys (several during a rotation) and the methods it may call (`<gRPC service>.<method>`, exactly as in proto/); every other method is refused PERMISSION_DENIED. The same list on every service (each takes the methods of its own gRPC services). docs/proto.md shows a client.',
  defaultText: 'none',
  required: false,
  secret: false,
  parse: (raw) => {
    const value = raw?.trim();
    if (value === undefined || value === '') return [];
    let list: unknown;
    try {
      list = JSON.parse(value);
    } catch {
      throw new InvalidValue('must be a JSON list');
    }
    if (!Array.isArray(list)) throw new InvalidValue('must be a JSON list');
    const names = new Set<string>();
    return list.map((item: unknown): InternalCaller => {
      const { name, publicKeys, methods } = (item ?? {}) as Record<string, unknown>;
      if (typeof name !== 'string') throw new InvalidValue('needs a name for every caller');
      checkCallerName(name, 'names');
      if ((SERVICE_NAMES as readonly string[]).includes(name))
        throw new InvalidValue(`names ${name}, a service: an internal caller needs a name of its own`);
      if (names.has(name)) throw new InvalidValue(`names ${name} twice`);
      names.add(name);
      if (
        !Array.isArray(publicKeys) ||
        publicKeys.length === 0 ||
        publicKeys.some((k) => typeof k !== 'string')
      )
        throw new InvalidValue(`needs publicKeys (a list of at least one key) for ${name}`);
      if (!Array.isArray(methods) || methods.some((m) => typeof m !== 'string' || !GRANTED_METHOD.test(m)))
        throw new InvalidValue(
          `needs methods as <gRPC service>.<method> (KeyService, JobOrchestrator or PaymentSettler) for ${name}`,
        );
      return {
        name,
        publicKeys: (publicKeys as string[]).map((key) => publicKeyText(parseServiceTokenPublicKey(key))),
        methods: [...new Set(methods as string[])],
      };
    });
  },
};

/** The settings of a service that only calls others (the gateway). */
export const serviceTokenCallerSettings = { SERVICE_TOKEN_PRIVATE_KEY: privateKeyField };
/** The settings of a service that serves gRPC to the others and calls none. */
export const serviceTokenServerSettings = {
  SERVICE_TOKEN_CALLER_KEYS: callerKeysField,
  SERVICE_TOKEN_INTERNAL_CALLERS: internalCallersField,
};
/** The settings of a service that serves gRPC to the others and calls some (the job-orchestrator). */
export const serviceTokenSettings = { ...serviceTokenCallerSettings, ...serviceTokenServerSettings };

/** What a called service's authenticator reads of its settings. */
export interface ServiceTokenServerConfig {
  readonly SERVICE_TOKEN_CALLER_KEYS: readonly CallerKey[];
  readonly SERVICE_TOKEN_INTERNAL_CALLERS?: readonly InternalCaller[];
}

/**
 * The settings' value for SERVICE_TOKEN_CALLER_KEYS: `<service>=<public key>` entries (the all-in-one
 * target writes its generated keys this way).
 */
export function callerKeysSetting(keys: Readonly<Partial<Record<ServiceName, string>>>): string {
  return Object.entries(keys)
    .filter(([, key]) => key !== undefined)
    .map(([caller, key]) => `${caller}=${key}`)
    .join(',');
}

export { CALLER_NAME };
