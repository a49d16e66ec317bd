export * from './gen/index.js';
export type {
  DebitAuthorizationStruct,
  JobStructOutput,
  ParametersStructOutput,
  SessionStructOutput,
} from './gen/typechain/JobRegistry.js';
export {
  connectJobRegistry,
  connectWorkerRegistry,
  jobRegistryInterface,
  workerRegistryInterface,
} from './connect.js';
export {
  deployContracts,
  type ConfiguredModel,
  type DeployConfig,
  type Deployment,
  type ModelFee,
} from './deploy.js';
export {
  ContractRevertError,
  decodeContractError,
  decodeRevertData,
  findRevertData,
  formatContractError,
  withDecodedRevert,
  type ContractError,
  type ContractErrorName,
} from './errors.js';
export { modelIdOf } from './modelId.js';
export {
  DEFAULT_PROTOCOL_PARAMETERS,
  DEFAULT_STAKING_PARAMETERS,
  fromParametersStruct,
  toParametersStruct,
  type ProtocolParameters,
  type StakingParameters,
} from './parameters.js';
export { JobState, SessionState } from './states.js';
export { DEBIT_AUTHORIZATION_TYPES, debitDomain, type DebitAuthorization } from './debitAuthorization.js';
