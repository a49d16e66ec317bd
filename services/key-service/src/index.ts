export { keyServiceConfigShape, loadKeyServiceConfig, type KeyServiceConfig } from './config.js';
export { generateKeyServiceSecrets, type KeyServiceSecrets } from './secrets.js';
export { buildKeyService, type KeyServiceInstance, type KeyServicePorts } from './service.js';
export { openDatabase, type DatabaseSettings } from './db/database.js';
export { applyMigrations, MIGRATIONS_DIR, MigrationError, type MigrationReport } from './db/migrate.js';
export { loadTokenKeyRing, TokenKeyRing, type TokenKeySettings } from './signin/token-key-ring.js';
export { SIGN_IN_TOKEN_TYPE } from './signin/sign-in-tokens.js';
export type { KeyServiceMethods } from './grpc/key-service-handlers.js';
export { createKeyServiceModule, keyServiceModule, type KeyServiceModuleOptions } from './module.js';
