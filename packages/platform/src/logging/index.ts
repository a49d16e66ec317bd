export {
  currentRequestContext,
  currentRequestId,
  withRequestContext,
  type RequestContext,
} from './context.js';
export { createLogger, REDACTED_PATHS, scrubSecrets, type Logger, type LoggerSettings } from './logger.js';
