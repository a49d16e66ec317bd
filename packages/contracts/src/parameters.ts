import type { ParametersStruct, ParametersStructOutput } from './gen/typechain/JobRegistry.js';

/** JobRegistry's owner-set parameters. Services read them from the chain, never assume them. */
export interface ProtocolParameters {
  claimWindowSeconds: number;
  jobTimeoutSeconds: number;
  /** An Active session idle this long may be closed by anyone. */
  inactivityTimeoutSeconds: number;
  /** How long after a failure the owner alone may reassign or refund. */
  refundGraceSeconds: number;
  disputeWindowSeconds: number;
  /** Attempts per job, the first included. */
  maxAttempts: number;
  /** Protocol's share of each released fee, in basis points. */
  protocolShareBps: number;
  /** Stake taken from a worker proven to have signed an answer other than the one it committed. */
  mismatchSlashWei: bigint;
}

/** WorkerRegistry's owner-set parameters. */
export interface StakingParameters {
  minStakeWei: bigint;
  /** At least job timeout + dispute window, so a leaving worker can still be disputed. */
  unbondingDelaySeconds: number;
}

const ETHER = 10n ** 18n;

export const DEFAULT_STAKING_PARAMETERS: StakingParameters = {
  minStakeWei: ETHER / 10n,
  unbondingDelaySeconds: 24 * 60 * 60,
};

export const DEFAULT_PROTOCOL_PARAMETERS: ProtocolParameters = {
  claimWindowSeconds: 30,
  jobTimeoutSeconds: 120,
  inactivityTimeoutSeconds: 30 * 60,
  refundGraceSeconds: 5 * 60,
  disputeWindowSeconds: 15 * 60,
  maxAttempts: 2,
  protocolShareBps: 500,
  mismatchSlashWei: DEFAULT_STAKING_PARAMETERS.minStakeWei,
};

export function toParametersStruct(parameters: ProtocolParameters): ParametersStruct {
  return {
    claimWindow: parameters.claimWindowSeconds,
    jobTimeout: parameters.jobTimeoutSeconds,
    inactivityTimeout: parameters.inactivityTimeoutSeconds,
    refundGrace: parameters.refundGraceSeconds,
    disputeWindow: parameters.disputeWindowSeconds,
    maxAttempts: parameters.maxAttempts,
    protocolShareBps: parameters.protocolShareBps,
    mismatchSlash: parameters.mismatchSlashWei,
  };
}

export function fromParametersStruct(struct: ParametersStructOutput): ProtocolParameters {
  return {
    claimWindowSeconds: Number(struct.claimWindow),
    jobTimeoutSeconds: Number(struct.jobTimeout),
    inactivityTimeoutSeconds: Number(struct.inactivityTimeout),
    refundGraceSeconds: Number(struct.refundGrace),
    disputeWindowSeconds: Number(struct.disputeWindow),
    maxAttempts: Number(struct.maxAttempts),
    protocolShareBps: Number(struct.protocolShareBps),
    mismatchSlashWei: struct.mismatchSlash,
  };
}
