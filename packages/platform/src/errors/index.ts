export {
  AppError,
  appErrorFromRpc,
  appErrorToRpc,
  isAppError,
  mapAppErrorToRpc,
  type AppErrorOptions,
  type ErrorFields,
} from './app-error.js';
export { GRPC_STATUS_OF_ERROR } from './grpc-status.js';
export {
  isPaymentRefusalCode,
  PAYMENT_REFUSAL_CODES,
  paymentRefusalFromProto,
  paymentRefusalToProto,
  type PaymentRefusalCode,
} from './payment-refusals.js';
