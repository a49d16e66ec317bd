export * from './config/index.js';
export * from './errors/index.js';
export * from './lifecycle/index.js';
export * from './logging/index.js';
export * from './rpc.js';
export * from './store/index.js';
export * from './events/index.js';
export { Remembered } from './remembered.js';
export {
  prepaidDebitRequirementsFromProto,
  prepaidDebitRequirementsToProto,
} from './payments/prepaid-debit-requirements.js';
