export { gatewayConfigShape, loadGatewayConfig, type GatewayConfig } from './config.js';
export { buildGatewayApp, type GatewayPorts } from './service.js';
export type { KeyServiceClient, KeyServiceMethods } from './key-service-client.js';
export type {
  ChatMessage,
  ChatRole,
  CompletionBackend,
  CompletionEvent,
  CompletionRequest,
  ServiceInfo,
  ModelListing,
  PaymentChain,
} from './v1/completion-backend.js';
export { gatewayModule, type GatewayInstance } from './module.js';
