export { env, parseDurationMs, type ConfigField } from './fields.js';
export { ConfigError, configReference, loadConfig, type ConfigOf, type ConfigShape } from './load.js';
