export { GracefulShutdown, type ShutdownOptions } from './shutdown.js';
export { Deadline, waitAtMost } from './wait-at-most.js';
