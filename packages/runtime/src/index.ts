export {
  defineModule,
  type Dependency,
  type ModuleDependencies,
  type PeerListener,
  type ServiceInstance,
  type ServiceModule,
  type SharedDependencies,
} from './module.js';
export {
  loopbackFor,
  runTarget,
  serviceTarget,
  type RunningTarget,
  type RunOptions,
  type Target,
  type Unit,
} from './runner.js';
export { parseCommandLine, runMain, type CommandLine } from './main.js';
export { peerClient, type PeerClientOptions } from './peer-client.js';
export { checkPeers } from './start-order.js';
export { runtimeConfigShape, type RuntimeConfig } from './config.js';
export { eventBusReadiness, GrpcReadinessMonitor, type ProcessReadiness } from './readiness.js';
export { DEFAULT_STATE_DIR } from './state-dir.js';
export type { ChainConnection } from './dependencies/chain.js';
export type { DatabaseConnection } from './dependencies/database.js';
export { gaugesOfOneRead, grpcServerMetrics, type ReadGauge } from './dependencies/metrics.js';
