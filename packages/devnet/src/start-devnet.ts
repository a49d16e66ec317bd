import {
  deployContracts,
  jobRegistryBytecode,
  workerRegistryBytecode,
  type ModelFee,
  type ProtocolParameters,
  type StakingParameters,
} from '@svc/contracts';
import { createDevProvider, sendWithBlobs, startAnvil, DevWallet, type AnvilAccount } from '@svc/anvil';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { JsonRpcProvider } from 'ethers';
import { accountWithRole, assignDemoAccounts, demoAccountCount } from './demo-accounts.js';
import {
  describeDevnet,
  readDevnetDescription,
  removeDevnetDescription,
  writeDevnetDescription,
  type DescriptionInput,
  type DevnetDescription,
} from './description.js';

const FINNEY = 10n ** 15n;

/** Two models named the way Ollama names them: clients send these ids verbatim, colons included. */
export const DEMO_MODELS: readonly ModelFee[] = [
  { name: 'llama3.2:1b', feeWei: FINNEY / 10n },
  { name: 'qwen2.5:0.5b', feeWei: FINNEY / 20n },
];

export const DEFAULT_DEVNET_CHAIN_ID = 31337;
const DEFAULT_WALLET_COUNT = 3;
/** anvil's own default; more only when more wallets are asked for. */
const ANVIL_DEFAULT_ACCOUNTS = 10;

export interface DevnetOptions {
  /** TCP port; 0 or omitted picks a free one. */
  port?: number;
  host?: string;
  /** Seconds between blocks; omitted mines a block per transaction. */
  blockTimeSeconds?: number;
  chainId?: number;
  models?: readonly ModelFee[];
  /** User wallets besides the owner, service-signer and worker accounts (default 3). */
  walletCount?: number;
  protocol?: Partial<ProtocolParameters>;
  staking?: Partial<StakingParameters>;
  /** Where to write the description; nothing is written when omitted. Removed again by stop(). */
  descriptionPath?: string;
  /**
   * A directory that keeps the chain across runs: anvil's state and the deployment it holds. When it
   * has both, the chain resumes where it stopped (balances, registrations, sessions, jobs) with the same
   * contracts; otherwise a fresh devnet is deployed into it. Delete the directory to start over.
   */
  stateDir?: string;
}

export interface Devnet {
  description: DevnetDescription;
  /** Set when the description was written to a file. */
  descriptionPath: string | undefined;
  /** True when the chain was resumed from `stateDir` rather than deployed now. */
  resumed: boolean;
  /** True when `stateDir` held a chain deployed with other contract code, discarded for a fresh one. */
  discardedStaleChain: boolean;
  /** Stops anvil (which writes its state), waits for it to exit and removes the description file; safe to call twice. */
  stop(): Promise<void>;
}

const STATE_FILE = 'anvil-state.json';
const DEPLOYMENT_FILE = 'deployment.json';
/** The fingerprint of the contract code the kept chain was deployed with. */
const CONTRACTS_FILE = 'contracts.sha256';

/** Changes whenever either contract's code does: a kept chain with other code is not resumed. */
function contractsFingerprint(): string {
  return createHash('sha256').update(jobRegistryBytecode).update(workerRegistryBytecode).digest('hex');
}

/**
 * A local chain ready for the service: anvil with both contracts deployed and configured, funded demo
 * accounts with roles, and anvil's KZG setup warmed so the first real blob transaction is fast.
 * Nothing else is registered: no workers, no deposits, no sessions.
 */
export async function startDevnet(options: DevnetOptions = {}): Promise<Devnet> {
  const walletCount = options.walletCount ?? DEFAULT_WALLET_COUNT;
  const { kept, discardedStaleChain } = options.stateDir
    ? keptDeployment(options.stateDir)
    : { kept: undefined, discardedStaleChain: false };
  if (options.stateDir) mkdirSync(options.stateDir, { recursive: true });
  const anvil = await startAnvil({
    port: options.port ?? 0,
    host: options.host,
    chainId: kept?.chainId ?? options.chainId ?? DEFAULT_DEVNET_CHAIN_ID,
    blockTime: options.blockTimeSeconds,
    accounts: Math.max(ANVIL_DEFAULT_ACCOUNTS, demoAccountCount(walletCount)),
    ...(options.stateDir ? { statePath: join(options.stateDir, STATE_FILE) } : {}),
  });
  let descriptionWritten = false;
  const stop = once(async () => {
    await anvil.stop();
    if (descriptionWritten && options.descriptionPath)
      removeDevnetDescription(options.descriptionPath, anvil.pid);
  });

  const provider = createDevProvider(anvil.rpcUrl, anvil.chainId, {
    pollingIntervalMs: options.blockTimeSeconds ? 250 : 25,
  });
  try {
    const accounts = assignDemoAccounts(anvil.accounts, walletCount);
    const warmUpAccount = anvil.accounts.at(-1) as AnvilAccount;
    const live = { rpcUrl: anvil.rpcUrl, anvilPid: anvil.pid, blockTimeSeconds: options.blockTimeSeconds };
    let description: DevnetDescription;
    if (kept && (await provider.getCode(kept.contracts.jobRegistry)) !== '0x') {
      description = describeDevnet({ ...fromDescription(kept), ...live });
      await warmUpKzg(provider, warmUpAccount);
    } else {
      const owner = new DevWallet(accountWithRole(accounts, 'owner').privateKey, provider);
      // Different senders, so the ~3.5 s warm-up overlaps the deployment without nonce clashes.
      const [deployment] = await Promise.all([
        deployContracts(owner, {
          protocol: options.protocol,
          staking: options.staking,
          models: [...(options.models ?? DEMO_MODELS)],
        }),
        warmUpKzg(provider, warmUpAccount),
      ]);
      description = describeDevnet({
        ...live,
        chainId: anvil.chainId,
        jobRegistryAddress: deployment.jobRegistryAddress,
        workerRegistryAddress: deployment.workerRegistryAddress,
        deploymentBlock: deployment.deploymentBlock,
        protocol: deployment.protocol,
        staking: deployment.staking,
        models: deployment.models,
        accounts,
      });
      if (options.stateDir) {
        writeDevnetDescription(join(options.stateDir, DEPLOYMENT_FILE), description);
        writeFileSync(join(options.stateDir, CONTRACTS_FILE), `${contractsFingerprint()}\n`);
      }
    }
    if (options.descriptionPath) {
      writeDevnetDescription(options.descriptionPath, description);
      descriptionWritten = true;
    }
    return {
      description,
      descriptionPath: options.descriptionPath,
      resumed: kept !== undefined && description.contracts.jobRegistry === kept.contracts.jobRegistry,
      discardedStaleChain,
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  } finally {
    provider.destroy();
  }
}

/**
 * The deployment a kept chain holds, when the directory has the state, its record and the fingerprint of
 * today's contract code. A chain deployed with other code (an older checkout) is discarded: resuming it
 * would run the services against contracts that no longer match them.
 */
function keptDeployment(stateDir: string): {
  kept: DevnetDescription | undefined;
  discardedStaleChain: boolean;
} {
  const record = join(stateDir, DEPLOYMENT_FILE);
  const fingerprint = join(stateDir, CONTRACTS_FILE);
  if (!existsSync(record) || !existsSync(join(stateDir, STATE_FILE)))
    return { kept: undefined, discardedStaleChain: false };
  if (!existsSync(fingerprint) || readFileSync(fingerprint, 'utf8').trim() !== contractsFingerprint()) {
    for (const file of [STATE_FILE, DEPLOYMENT_FILE, CONTRACTS_FILE])
      rmSync(join(stateDir, file), { force: true });
    return { kept: undefined, discardedStaleChain: true };
  }
  return { kept: readDevnetDescription(record), discardedStaleChain: false };
}

/** A recorded description as the input that describes it again (parameters back to their types). */
function fromDescription(
  description: DevnetDescription,
): Omit<DescriptionInput, 'rpcUrl' | 'anvilPid' | 'blockTimeSeconds'> {
  const { protocol, staking } = description.parameters;
  return {
    chainId: description.chainId,
    jobRegistryAddress: description.contracts.jobRegistry,
    workerRegistryAddress: description.contracts.workerRegistry,
    deploymentBlock: description.contracts.deploymentBlock,
    protocol: { ...protocol, mismatchSlashWei: BigInt(protocol.mismatchSlashWei) },
    staking: {
      minStakeWei: BigInt(staking.minStakeWei),
      unbondingDelaySeconds: staking.unbondingDelaySeconds,
    },
    models: description.models.map((model) => ({ ...model, feeWei: BigInt(model.feeWei) })),
    accounts: description.accounts,
  };
}

/** anvil loads its KZG trusted setup on the first blob transaction (~3.5 s); pay that now. */
async function warmUpKzg(provider: JsonRpcProvider, account: AnvilAccount): Promise<void> {
  const wallet = new DevWallet(account.privateKey, provider);
  const sent = await sendWithBlobs(wallet, { to: wallet.address }, 1);
  const receipt = await sent.wait();
  if (receipt?.status !== 1) throw new Error('the KZG warm-up blob transaction failed');
}

function once(action: () => Promise<void>): () => Promise<void> {
  let result: Promise<void> | undefined;
  return () => (result ??= action());
}
