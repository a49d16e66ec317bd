export * from './config/index.js';
export * from './errors/index.js';
export * from './lifecycle/index.js';
export * from './logging/index.js';
export * from './rpc.js';
export {
  SERVICE_TOKEN_LIFETIME_MS,
  SERVICE_TOKEN_TYPE,
  ServiceIdentity,
  serviceCallers,
  serviceTokenCallerSettings,
  serviceTokenSettings,
  type ServiceCallersOptions,
  type ServiceName,
  type ServiceTokenSecrets,
} from './service-tokens.js';
export * from './store/index.js';
export { LIMIT_HIT_KINDS, LIMIT_HITS_TALLY, limitHitField, type LimitHitKind } from './limit-hits-tally.js';
export * from './events/index.js';
export { Remembered } from './remembered.js';
export {
  prepaidDebitRequirementsFromProto,
  prepaidDebitRequirementsToProto,
} from './payments/prepaid-debit-requirements.js';
