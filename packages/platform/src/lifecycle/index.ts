export { GracefulShutdown, type ShutdownOptions } from './shutdown.js';
