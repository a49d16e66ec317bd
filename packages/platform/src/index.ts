export * from './config/index.js';
export * from './errors/index.js';
export * from './lifecycle/index.js';
export * from './logging/index.js';
export * from './rpc.js';
export * from './tracing/index.js';
export {
  methodGrants,
  SERVICE_TOKEN_ALGORITHM,
  SERVICE_TOKEN_LIFETIME_MS,
  SERVICE_TOKEN_TYPE,
  ServiceIdentity,
  serviceCallers,
  type GrpcServiceDescriptor,
  type ServiceCallersOptions,
} from './service-tokens.js';
export {
  callerKeysSetting,
  generateServiceTokenKeyPair,
  parseServiceTokenPrivateKey,
  parseServiceTokenPublicKey,
  publicKeyText,
  SERVICE_NAMES,
  serviceTokenCallerSettings,
  serviceTokenKeyId,
  serviceTokenServerSettings,
  serviceTokenSettings,
  type CallerKey,
  type InternalCaller,
  type ServiceName,
  type ServiceTokenServerConfig,
} from './service-token-keys.js';
export { SERVICE_CALL_GRANTS } from './service-call-grants.js';
export * from './store/index.js';
export { LIMIT_HIT_KINDS, LIMIT_HITS_TALLY, limitHitField, type LimitHitKind } from './limit-hits-tally.js';
export * from './events/index.js';
export { Remembered } from './remembered.js';
export {
  prepaidDebitRequirementsFromProto,
  prepaidDebitRequirementsToProto,
} from './payments/prepaid-debit-requirements.js';
