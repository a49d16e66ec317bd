import {
  connectJobRegistry,
  deployContracts,
  jobRegistryBytecode,
  withDecodedRevert,
  workerRegistryBytecode,
  type ModelFee,
  type ProtocolParameters,
  type StakingParameters,
} from '@svc/contracts';
import { createDevProvider, sendWithBlobs, startAnvil, DevWallet, type AnvilAccount } from '@svc/anvil';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ContractTransactionResponse, JsonRpcProvider } from 'ethers';
import {
  DEMO_WALLET_DEPOSIT_WEI,
  accountWithRole,
  assignDemoAccounts,
  demoAccountCount,
  operatorAccounts,
  type DemoAccount,
} from './demo-accounts.js';
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

/**
 * Bumped whenever what a fresh devnet sets up on its chain changes (accounts, operators, deposits), so
 * a chain kept by older setup code is discarded rather than resumed without it. 2: the service signer's
 * operators and user wallet 1's deposit. 3: the facilitator, its operator and its authorization.
 */
export const DEVNET_SETUP_VERSION = 3;
const DEFAULT_WALLET_COUNT = 3;
/** anvil's own default: the least it is started with, more when the role accounts need them. */
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
  /**
   * Whether start-up returns before anvil's KZG warm-up (its first blob transaction, ~3.5 s) is mined:
   * the caller starts meanwhile (the all-in-one server, its services and workers), and a blob
   * transaction sent before the warm-up is done waits for it inside anvil, as the first one would.
   * `warmedUp` says when it is done. Default: false, start-up includes it.
   */
  warmUpInBackground?: boolean;
}

export interface Devnet {
  description: DevnetDescription;
  /** Set when the description was written to a file. */
  descriptionPath: string | undefined;
  /** True when the chain was resumed from `stateDir` rather than deployed now. */
  resumed: boolean;
  /**
   * True when `stateDir` held a chain deployed with other contract code or set up by other devnet code
   * (`DEVNET_SETUP_VERSION`), discarded for a fresh one.
   */
  discardedStaleChain: boolean;
  /** Settles once anvil's KZG setup is warm; rejects when the warm-up transaction failed (not after stop()). */
  warmedUp: Promise<void>;
  /** Stops anvil (which writes its state), waits for it to exit and removes the description file; safe to call twice. */
  stop(): Promise<void>;
}

const STATE_FILE = 'anvil-state.json';
const DEPLOYMENT_FILE = 'deployment.json';
/** The fingerprint of the contract code and the setup version the kept chain was made with. */
const CONTRACTS_FILE = 'contracts.sha256';

/**
 * Changes whenever either contract's code or the devnet's setup version does: a kept chain made with
 * other code is not resumed.
 */
function chainFingerprint(): string {
  return createHash('sha256')
    .update(`devnet setup ${DEVNET_SETUP_VERSION}\n`)
    .update(jobRegistryBytecode)
    .update(workerRegistryBytecode)
    .digest('hex');
}

/**
 * A local chain ready for the service: anvil with both contracts deployed and configured, funded demo
 * accounts with roles, the service signer's operators accepted, user wallet 1's deposit with the
 * service signer authorized (the other wallets have none, for the 402 flow), and anvil's KZG setup
 * warmed so the first real blob transaction is fast. Nothing else: no workers, no sessions.
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
  let stopping = false;
  let warmedUp: Promise<void> = Promise.resolve();
  const stop = once(async () => {
    stopping = true;
    await anvil.stop();
    // A warm-up still in flight fails with anvil gone; that is no failure of the devnet.
    await warmedUp.catch(() => {});
    if (descriptionWritten && options.descriptionPath)
      removeDevnetDescription(options.descriptionPath, anvil.pid);
  });

  const provider = createDevProvider(anvil.rpcUrl, anvil.chainId, {
    pollingIntervalMs: options.blockTimeSeconds ? 250 : 25,
  });
  try {
    const accounts = assignDemoAccounts(anvil.accounts, walletCount);
    const warmUpAccount = anvil.accounts.at(-1) as AnvilAccount;
    // From an account of its own, so it overlaps the deployment or the caller's start without nonce clashes.
    warmedUp = warmUpKzg(anvil, warmUpAccount, options.blockTimeSeconds ? 250 : 25, () => stopping);
    warmedUp.catch(() => {}); // awaited below or by the caller; never an unhandled rejection
    const warmUp = options.warmUpInBackground ? Promise.resolve() : warmedUp;
    const live = { rpcUrl: anvil.rpcUrl, anvilPid: anvil.pid, blockTimeSeconds: options.blockTimeSeconds };
    let description: DevnetDescription;
    if (kept && (await provider.getCode(kept.contracts.jobRegistry)) !== '0x') {
      description = describeDevnet({ ...fromDescription(kept), ...live });
      await warmUp;
    } else {
      const owner = new DevWallet(accountWithRole(accounts, 'owner').privateKey, provider);
      const [deployment] = await Promise.all([
        deployContracts(owner, {
          protocol: options.protocol,
          staking: options.staking,
          models: [...(options.models ?? DEMO_MODELS)],
        }).then(async (deployed) => {
          await prepareAccounts(provider, deployed.jobRegistryAddress, accounts);
          return deployed;
        }),
        warmUp,
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
        writeFileSync(join(options.stateDir, CONTRACTS_FILE), `${chainFingerprint()}\n`);
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
      warmedUp,
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
 * today's contract code and setup version. A chain made with other code (an older checkout) is
 * discarded: resuming it would run the services against contracts, or a set-up, that no longer match
 * them.
 */
function keptDeployment(stateDir: string): {
  kept: DevnetDescription | undefined;
  discardedStaleChain: boolean;
} {
  const record = join(stateDir, DEPLOYMENT_FILE);
  const fingerprint = join(stateDir, CONTRACTS_FILE);
  if (!existsSync(record) || !existsSync(join(stateDir, STATE_FILE)))
    return { kept: undefined, discardedStaleChain: false };
  if (!existsSync(fingerprint) || readFileSync(fingerprint, 'utf8').trim() !== chainFingerprint()) {
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

/**
 * What a fresh chain needs besides the contracts, with each sender's transactions in its own chain of
 * awaits so they run side by side: the service signer names its operators (each operator accepts as
 * soon as its offer is mined) and then authorizes the facilitator as its delegate, the facilitator hands
 * off to its operator likewise, and user wallet 1 deposits with the service signer authorized.
 */
async function prepareAccounts(
  provider: JsonRpcProvider,
  jobRegistryAddress: string,
  accounts: readonly DemoAccount[],
): Promise<void> {
  const wallet = accounts.find((account) => account.role === 'wallet');
  const signer = accountWithRole(accounts, 'service-signer');
  const facilitator = accountWithRole(accounts, 'facilitator');
  await Promise.all([
    (async () => {
      await handOffOperators(provider, jobRegistryAddress, signer, operatorAccounts(accounts));
      await authorizeFacilitator(provider, jobRegistryAddress, signer, facilitator.address);
    })(),
    handOffOperators(
      provider,
      jobRegistryAddress,
      facilitator,
      accounts.filter((account) => account.role === 'facilitator-operator'),
    ),
    wallet && depositAndAuthorize(provider, jobRegistryAddress, wallet, signer.address),
  ]);
}

/** `setDelegateAuthorization(facilitator, true)` from the service signer: per-call payments can settle. */
async function authorizeFacilitator(
  provider: JsonRpcProvider,
  jobRegistryAddress: string,
  signerAccount: DemoAccount,
  facilitatorAddress: string,
): Promise<void> {
  const asSigner = connectJobRegistry(jobRegistryAddress, new DevWallet(signerAccount.privateKey, provider));
  const { mined } = await confirmed(
    `let the service signer authorize the facilitator ${facilitatorAddress}`,
    asSigner.setDelegateAuthorization(facilitatorAddress, true),
  );
  await mined;
}

/**
 * The two-step hand-off of docs/protocol.md ("Principals and operators") for every operator of a
 * principal (the service signer, the facilitator): the principal offers (`setOperator(operator, true)`,
 * nonces assigned here so the offers go out back to back), the operator accepts
 * (`acceptOperator(principal)`). Checked afterwards with `principalOf`.
 */
async function handOffOperators(
  provider: JsonRpcProvider,
  jobRegistryAddress: string,
  principalAccount: DemoAccount,
  operators: readonly DemoAccount[],
): Promise<void> {
  const principalRole = principalAccount.role;
  const signer = new DevWallet(principalAccount.privateKey, provider);
  const asSigner = connectJobRegistry(jobRegistryAddress, signer);
  let nonce = await signer.getNonce('pending');
  const offers: Array<Promise<void>> = [];
  for (const operator of operators) {
    const sent = await confirmed(
      `offer ${operator.address} as an operator of the ${principalRole}`,
      asSigner.setOperator(operator.address, true, { nonce: nonce++ }),
    );
    offers.push(sent.mined);
  }
  await Promise.all(
    operators.map(async (operator, index) => {
      await offers[index];
      const asOperator = connectJobRegistry(jobRegistryAddress, new DevWallet(operator.privateKey, provider));
      const { mined } = await confirmed(
        `let ${operator.address} accept the ${principalRole}'s operator offer`,
        asOperator.acceptOperator(signer.address),
      );
      await mined;
    }),
  );
  const registry = connectJobRegistry(jobRegistryAddress, provider);
  for (const operator of operators) {
    const principal = await registry.principalOf(operator.address);
    if (principal !== signer.address) {
      throw new Error(
        `the devnet's operator hand-off failed: principalOf(${operator.address}) is ${principal}, not the ${principalRole} ${signer.address}`,
      );
    }
  }
}

/** `depositAndAuthorize(signer)` from `wallet`: its API-key calls are paid at once. */
async function depositAndAuthorize(
  provider: JsonRpcProvider,
  jobRegistryAddress: string,
  wallet: DemoAccount,
  signerAddress: string,
): Promise<void> {
  const asWallet = connectJobRegistry(jobRegistryAddress, new DevWallet(wallet.privateKey, provider));
  const { mined } = await confirmed(
    `deposit from ${wallet.address} and authorize the service signer`,
    asWallet.depositAndAuthorize(signerAddress, { value: DEMO_WALLET_DEPOSIT_WEI }),
  );
  await mined;
}

/**
 * Sends a set-up transaction; `mined` settles when it is mined successfully. Either step fails with
 * what was being done and the decoded revert, so a set-up that goes wrong says why.
 */
async function confirmed(
  what: string,
  sending: Promise<ContractTransactionResponse>,
): Promise<{ mined: Promise<void> }> {
  const explain = (error: unknown): never => {
    throw new Error(`the devnet could not ${what}: ${(error as Error).message}`, { cause: error });
  };
  const sent = await withDecodedRevert(sending).catch(explain);
  const mined = withDecodedRevert(sent.wait())
    .then((receipt) => {
      if (receipt?.status !== 1) throw new Error(`transaction ${sent.hash} was not mined successfully`);
    })
    .catch(explain);
  // Awaited by the caller; never an unhandled rejection in between.
  mined.catch(() => {});
  return { mined };
}

/**
 * anvil loads its KZG trusted setup on the first blob transaction (~3.5 s); pay that now. With a provider
 * of its own: start-up destroys its provider when it returns, which may be before this is done.
 */
async function warmUpKzg(
  anvil: { rpcUrl: string; chainId: number },
  account: AnvilAccount,
  pollingIntervalMs: number,
  stopped: () => boolean,
): Promise<void> {
  const provider = createDevProvider(anvil.rpcUrl, anvil.chainId, { pollingIntervalMs });
  try {
    const wallet = new DevWallet(account.privateKey, provider);
    const sent = await sendWithBlobs(wallet, { to: wallet.address }, 1);
    const receipt = await sent.wait();
    if (receipt?.status !== 1) throw new Error('the KZG warm-up blob transaction failed');
  } catch (error) {
    if (!stopped()) throw error;
  } finally {
    provider.destroy();
  }
}

function once(action: () => Promise<void>): () => Promise<void> {
  let result: Promise<void> | undefined;
  return () => (result ??= action());
}
