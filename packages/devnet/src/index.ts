export {
  accountWithRole,
  assignDemoAccounts,
  type DemoAccount,
  type DemoAccountRole,
} from './demo-accounts.js';
export {
  DEVNET_DESCRIPTION_VERSION,
  InvalidDevnetDescription,
  describeDevnet,
  parseDevnetDescription,
  readDevnetDescription,
  removeDevnetDescription,
  writeDevnetDescription,
  type DevnetDescription,
} from './description.js';
export { describeExternalChain, jsonRpc } from './external-chain.js';
export { humanSummary, loggableSummary } from './summary.js';
export {
  DEFAULT_DEVNET_CHAIN_ID,
  DEMO_MODELS,
  startDevnet,
  type Devnet,
  type DevnetOptions,
} from './start-devnet.js';
export { DEFAULT_DEVNET_FILE, devnetConfigShape, resolveDevnetFile, type DevnetConfig } from './config.js';
