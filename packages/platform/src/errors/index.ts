export { API_ERRORS, isApiErrorName, type ApiErrorName, type ApiErrorSpec } from './catalogue.js';
export {
  AppError,
  appErrorFromRpc,
  appErrorToRpc,
  isAppError,
  mapAppErrorToRpc,
  type AppErrorOptions,
  type ErrorFields,
} from './app-error.js';
export { apiErrorBody, errorHeaders, streamErrorEvent, v1ErrorBody } from './wire.js';
export {
  isPaymentRefusalCode,
  PAYMENT_REFUSAL_CODES,
  paymentRefusalFromProto,
  paymentRefusalToProto,
  type PaymentRefusalCode,
} from './payment-refusals.js';
