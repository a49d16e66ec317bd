import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { ConfiguredModel, ProtocolParameters, StakingParameters } from '@svc/contracts';
import { getAddress, isAddress } from 'ethers';
import { z } from 'zod';
import { DEMO_ACCOUNT_ROLES, type DemoAccount } from './demo-accounts.js';

/** Bumped when a field changes meaning or disappears, so an old reader refuses a new file. */
export const DEVNET_DESCRIPTION_VERSION = 1;

const decimalWei = z.string().regex(/^\d{1,78}$/, 'a decimal string of wei');
const address = z
  .string()
  .refine((value) => isAddress(value), 'an Ethereum address')
  .transform((value) => getAddress(value));
const bytes32 = z.string().regex(/^0x[0-9a-fA-F]{64}$/, '32 bytes in hex');
const seconds = z.number().int().nonnegative();

const descriptionSchema = z.object({
  version: z.literal(DEVNET_DESCRIPTION_VERSION),
  rpcUrl: z.url({ protocol: /^(https?|wss?)$/ }),
  chainId: z.number().int().positive(),
  /** null: a block per transaction (automine). */
  blockTimeSeconds: z.number().int().positive().nullable(),
  /** The anvil process serving the chain, so tooling can tell whether it is still up. */
  anvilPid: z.number().int().positive(),
  startedAt: z.iso.datetime(),
  contracts: z.object({
    jobRegistry: address,
    workerRegistry: address,
    /** First block of the deployment: where log scans start. */
    deploymentBlock: z.number().int().nonnegative(),
  }),
  parameters: z.object({
    protocol: z.object({
      claimWindowSeconds: seconds,
      jobTimeoutSeconds: seconds,
      inactivityTimeoutSeconds: seconds,
      refundGraceSeconds: seconds,
      disputeWindowSeconds: seconds,
      maxAttempts: z.number().int().positive(),
      protocolShareBps: z.number().int().min(0).max(10_000),
      mismatchSlashWei: decimalWei,
    }),
    staking: z.object({ minStakeWei: decimalWei, unbondingDelaySeconds: seconds }),
  }),
  /** `name` is the id clients send verbatim; `modelId` is keccak256 of it, the on-chain key. */
  models: z.array(z.object({ name: z.string().min(1), modelId: bytes32, feeWei: decimalWei })).min(1),
  accounts: z
    .array(
      z.object({
        role: z.enum(DEMO_ACCOUNT_ROLES),
        address,
        privateKey: bytes32,
        purpose: z.string(),
      }),
    )
    .min(1),
});

/**
 * What a running devnet is, as JSON: everything a service, worker or script needs to use it. Wei
 * amounts are decimal strings; private keys are anvil's public dev keys, never real ones.
 */
export type DevnetDescription = z.infer<typeof descriptionSchema>;

export interface DescriptionInput {
  rpcUrl: string;
  chainId: number;
  blockTimeSeconds: number | undefined;
  anvilPid: number;
  jobRegistryAddress: string;
  workerRegistryAddress: string;
  deploymentBlock: number;
  protocol: ProtocolParameters;
  staking: StakingParameters;
  models: readonly ConfiguredModel[];
  accounts: readonly DemoAccount[];
}

export function describeDevnet(input: DescriptionInput, startedAt = new Date()): DevnetDescription {
  return descriptionSchema.parse({
    version: DEVNET_DESCRIPTION_VERSION,
    rpcUrl: input.rpcUrl,
    chainId: input.chainId,
    blockTimeSeconds: input.blockTimeSeconds ?? null,
    anvilPid: input.anvilPid,
    startedAt: startedAt.toISOString(),
    contracts: {
      jobRegistry: input.jobRegistryAddress,
      workerRegistry: input.workerRegistryAddress,
      deploymentBlock: input.deploymentBlock,
    },
    parameters: {
      protocol: { ...input.protocol, mismatchSlashWei: input.protocol.mismatchSlashWei.toString() },
      staking: {
        minStakeWei: input.staking.minStakeWei.toString(),
        unbondingDelaySeconds: input.staking.unbondingDelaySeconds,
      },
    },
    models: input.models.map(({ name, modelId, feeWei }) => ({ name, modelId, feeWei: feeWei.toString() })),
    accounts: input.accounts.map(({ role, address: accountAddress, privateKey, purpose }) => ({
      role,
      address: accountAddress,
      privateKey,
      purpose,
    })),
  });
}

export class InvalidDevnetDescription extends Error {
  override readonly name = 'InvalidDevnetDescription';
}

/** Parses and checks a description; the error names every field that is wrong. */
export function parseDevnetDescription(json: unknown, source = 'devnet description'): DevnetDescription {
  const result = descriptionSchema.safeParse(json);
  if (!result.success) {
    const problems = result.error.issues.map(
      (issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`,
    );
    throw new InvalidDevnetDescription(
      `${source} is not a valid devnet description:\n  ${problems.join('\n  ')}`,
    );
  }
  return result.data;
}

export function readDevnetDescription(path: string): DevnetDescription {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new InvalidDevnetDescription(`cannot read the devnet description ${path}: ${String(error)}`, {
      cause: error,
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new InvalidDevnetDescription(`${path} is not JSON`);
  }
  return parseDevnetDescription(json, path);
}

/**
 * Writes the description through a temporary file and a rename, so a reader polling for it never
 * sees half of it. Owner-only permissions: it holds (dev) private keys.
 */
export function writeDevnetDescription(path: string, description: DevnetDescription): void {
  mkdirSync(dirname(path), { recursive: true });
  const partial = `${path}.${process.pid}.tmp`;
  writeFileSync(partial, `${JSON.stringify(description, null, 2)}\n`, { mode: 0o600 });
  renameSync(partial, path);
}

/** Removes the description if it still describes the devnet of `anvilPid` (a newer one may own it). */
export function removeDevnetDescription(path: string, anvilPid: number): void {
  let current: DevnetDescription;
  try {
    current = readDevnetDescription(path);
  } catch {
    return;
  }
  if (current.anvilPid === anvilPid) rmSync(path, { force: true });
}
