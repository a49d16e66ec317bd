export { loadPaymentSettlerConfig, paymentSettlerConfigShape, type PaymentSettlerConfig } from './config.js';
export { paymentSettlerModule, type PaymentSettlerInstance } from './module.js';
export { buildPaymentSettler, verifyFacilitatorSetup, type PaymentSettlerPorts } from './service.js';
