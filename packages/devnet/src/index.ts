export {
  DEMO_ACCOUNT_ROLES,
  DEMO_WALLET_DEPOSIT_WEI,
  accountWithRole,
  assignDemoAccounts,
  demoAccountCount,
  operatorAccounts,
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
  DEVNET_SETUP_VERSION,
  startDevnet,
  type Devnet,
  type DevnetOptions,
} from './start-devnet.js';
export { DEFAULT_DEVNET_FILE, devnetConfigShape, resolveDevnetFile, type DevnetConfig } from './config.js';
