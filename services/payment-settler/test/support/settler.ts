import {
  concat,
  dataSlice,
  getAddress,
  getBytes,
  hexlify,
  parseEther,
  randomBytes,
  toBeHex,
  TypedDataEncoder,
  Wallet,
  zeroPadValue,
  type BaseWallet,
  type Signer,
} from 'ethers';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import { connectJobRegistry, DEBIT_AUTHORIZATION_TYPES, debitDomain } from '@svc/contracts';
import { createLogger, prepaidDebitRequirementsFromProto, type Store } from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS, testServiceClientOptions } from '@svc/platform/testing';
import { closeClient, createClient, RpcError, type ServiceClient } from '@svc/proto';
import {
  PaymentSettler,
  type PaymentRefusal,
  type VerifiedPayment,
  type VerifyPaymentResponse,
} from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { runTarget, type RunningTarget } from '@svc/runtime';
import type { Devnet } from '@svc/testkit';
import {
  chainIdOf,
  debitAuthorizationOf,
  encodeHeader,
  type DebitAuthorizationJson,
  type PaymentPayload,
  type PrepaidDebitRequirements,
} from '@svc/x402';
import { paymentSettlerModule } from '../../src/module.js';

/** Dev accounts of the test devnet as these suites use them (0 deployed, and owns, the contracts). */
export const ACCOUNTS = {
  owner: 0,
  signer: 1,
  facilitator: 6,
  facilitatorOperator: 7,
  /** Accounts that play no part in the setup: another facilitator, another payTo, spare operators. */
  stranger: 8,
  otherPayTo: 9,
  spareOperator: 10,
  funder: 11,
  spareFacilitator: 12,
} as const;

/** The model every suite pays for, and one whose fee the suites change (fees in wei). */
export const MODEL = { name: 'svc-deterministic:1', feeWei: parseEther('0.001') };
export const REPRICED_MODEL = { name: 'svc-repriced:1', feeWei: parseEther('0.002') };
/** Configured with fee 0: disabled. */
export const DISABLED_MODEL = { name: 'svc-disabled:1', feeWei: 0n };
export const DEPLOYED_MODELS = [MODEL, REPRICED_MODEL, DISABLED_MODEL];

export const RESOURCE_URL = 'https://api.example.test/v1/chat/completions';

export type PaymentSettlerClient = ServiceClient<
  typeof PaymentSettler extends GenService<infer S> ? S : never
>;

/**
 * The per-call setup on chain: the service signer authorizes the facilitator as its delegate, and the
 * facilitator's operator accepts its offer.
 */
export async function preparePerCallAccounts(devnet: Devnet): Promise<void> {
  const signer = devnet.wallet(ACCOUNTS.signer);
  const facilitator = devnet.wallet(ACCOUNTS.facilitator);
  const operator = devnet.wallet(ACCOUNTS.facilitatorOperator);
  const registry = connectJobRegistry(devnet.deployment.jobRegistryAddress, signer);
  await (await registry.setDelegateAuthorization(facilitator.address, true)).wait();
  await (await registry.connect(facilitator).setOperator(operator.address, true)).wait();
  await (await registry.connect(operator).acceptOperator(facilitator.address)).wait();
}

/** The settler's environment taking per-call payments with the prepared accounts. */
export function perCallEnv(devnet: Devnet, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    GRPC_PORT: '0',
    FACILITATOR_PRIVATE_KEY: devnet.wallet(ACCOUNTS.facilitator).privateKey,
    FACILITATOR_OPERATOR_PRIVATE_KEYS: devnet.wallet(ACCOUNTS.facilitatorOperator).privateKey,
    PAY_TO_ADDRESS: devnet.wallet(ACCOUNTS.signer).address,
    TX_POLL_INTERVAL: '20ms',
    ...overrides,
  };
}

/** Runs the settler module in its own target, as a deployment does. */
export function runSettler(
  devnet: Devnet,
  store: Store,
  env: Record<string, string>,
): Promise<RunningTarget> {
  return runTarget(
    { name: 'payment-settler', modules: [paymentSettlerModule] },
    {
      env: { ...TEST_SERVICE_TOKEN_SETTINGS, METRICS_PORT: '0', ...env },
      provided: { store, chain: devnet.connection() },
      logger: createLogger({
        service: 'payment-settler-test',
        level: process.env.TEST_LOG_LEVEL ?? 'silent',
      }),
    },
  );
}

export interface Settler {
  readonly running: RunningTarget;
  /** A client calling as the gateway does: requirements, verification, release. */
  readonly client: PaymentSettlerClient;
  /** A client calling as the job-orchestrator does: settlement, which the gateway may not call. */
  readonly asOrchestrator: PaymentSettlerClient;
  stop(): Promise<void>;
}

/** A running settler and a gRPC client of it. */
export async function startSettler(
  devnet: Devnet,
  store: Store,
  env: Record<string, string>,
): Promise<Settler> {
  const running = await runSettler(devnet, store, env);
  const client = createClient(
    PaymentSettler,
    running.grpcAddress!,
    testServiceClientOptions('payment-settler'),
  );
  const asOrchestrator = createClient(
    PaymentSettler,
    running.grpcAddress!,
    testServiceClientOptions('payment-settler', { as: 'job-orchestrator' }),
  );
  return {
    running,
    client,
    asOrchestrator,
    async stop() {
      closeClient(client);
      closeClient(asOrchestrator);
      await running.stop();
    },
  };
}

/** The settler's current requirements for `model`, as a payer signs them. */
export async function currentRequirements(
  client: PaymentSettlerClient,
  model = MODEL.name,
): Promise<PrepaidDebitRequirements> {
  const { requirements } = await client.getRequirements({ model, resourceUrl: RESOURCE_URL });
  return prepaidDebitRequirementsFromProto(requirements!);
}

/** A fresh random wallet with ETH for gas (from the funder account). */
export async function fundedWallet(devnet: Devnet): Promise<Wallet> {
  const wallet = new Wallet(Wallet.createRandom().privateKey, devnet.provider);
  await (
    await devnet.wallet(ACCOUNTS.funder).sendTransaction({ to: wallet.address, value: parseEther('1') })
  ).wait();
  return wallet;
}

/** A fresh wallet with `deposit` in its JobRegistry prepaid balance and no delegate. */
export async function depositedWallet(devnet: Devnet, deposit = parseEther('0.1')): Promise<Wallet> {
  const wallet = await fundedWallet(devnet);
  const registry = connectJobRegistry(devnet.deployment.jobRegistryAddress, wallet);
  await (await registry.deposit({ value: deposit })).wait();
  return wallet;
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

export interface SignOptions {
  /** Signs over this chain id's domain instead of the requirements' network. */
  readonly domainChainId?: bigint;
  /** Signs with this wallet instead of the payer's. */
  readonly signer?: Signer;
}

/**
 * A `prepaid-debit` payment for `requirements` whose authorization may differ from what the requirements
 * ask (another facilitator, another payTo, a passed deadline...), signed for real with EIP-712 over
 * JobRegistry's domain. `accepted` is the requirements verbatim.
 */
export async function signedPayload(
  payer: BaseWallet,
  requirements: PrepaidDebitRequirements,
  authorization: Partial<DebitAuthorizationJson> = {},
  options: SignOptions = {},
): Promise<PaymentPayload> {
  const signed: DebitAuthorizationJson = {
    payer: payer.address,
    payTo: requirements.payTo,
    facilitator: requirements.extra.facilitatorAddress,
    maxAmount: requirements.amount,
    deadline: String(nowSeconds() + requirements.maxTimeoutSeconds),
    nonce: hexlify(randomBytes(32)),
    ...authorization,
  };
  const signature = await (options.signer ?? payer).signTypedData(
    debitDomain(options.domainChainId ?? chainIdOf(requirements.network), requirements.asset),
    DEBIT_AUTHORIZATION_TYPES,
    debitAuthorizationOf(signed),
  );
  return { x402Version: 2, accepted: requirements, payload: { signature, authorization: signed } };
}

/** The header value of any JSON, well formed or not. */
export function header(value: unknown): string {
  return encodeHeader(value);
}

/** secp256k1's group order. */
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

/** The malleable twin of a signature: the same signer over the same digest, with s' = n - s and v flipped. */
export function highSTwin(signature: string): string {
  const bytes = getBytes(signature);
  const s = BigInt(hexlify(bytes.subarray(32, 64)));
  return hexlify(
    concat([bytes.subarray(0, 32), toBeHex(SECP256K1_N - s, 32), bytes[64] === 27 ? '0x1c' : '0x1b']),
  );
}

/** The EIP-712 digest JobRegistry checks a payment's signature against. */
export function debitDigest(
  chainId: bigint,
  jobRegistry: string,
  authorization: DebitAuthorizationJson,
): string {
  return TypedDataEncoder.hash(
    debitDomain(chainId, jobRegistry),
    DEBIT_AUTHORIZATION_TYPES,
    debitAuthorizationOf(authorization),
  );
}

/**
 * What the chain's own `ecrecover` precompile recovers from a signature (no low-s rule there), so a test
 * can show a twin is a genuine signature of the payer.
 */
export async function ecrecover(devnet: Devnet, digest: string, signature: string): Promise<string> {
  const bytes = getBytes(signature);
  const data = concat([
    digest,
    zeroPadValue(toBeHex(bytes[64]!), 32),
    bytes.subarray(0, 32),
    bytes.subarray(32, 64),
  ]);
  const output = await devnet.provider.call({ to: '0x0000000000000000000000000000000000000001', data });
  return getAddress(dataSlice(output, 12));
}

export type VerifyOutcome = VerifyPaymentResponse['outcome'];

/** Verifies a `PAYMENT-SIGNATURE` for `model` over gRPC. */
export async function verify(
  client: PaymentSettlerClient,
  paymentSignature: string,
  options: { model?: string; reservationTtlMs?: number } = {},
): Promise<VerifyOutcome> {
  const ttl = options.reservationTtlMs;
  const { outcome } = await client.verifyPayment({
    paymentSignature,
    model: options.model ?? MODEL.name,
    resourceUrl: RESOURCE_URL,
    requestId: 'payment-settler-test',
    ...(ttl === undefined
      ? {}
      : { reservationTtl: { seconds: BigInt(Math.floor(ttl / 1000)), nanos: (ttl % 1000) * 1_000_000 } }),
  });
  return outcome;
}

/** The refusal of an outcome; throws (failing the test) on any other outcome. */
export function refusalOf(outcome: VerifyOutcome): PaymentRefusal {
  if (outcome.case !== 'refused') throw new Error(`expected a refusal, got ${describe(outcome)}`);
  return outcome.value;
}

/** The verified payment of an outcome; throws (failing the test) on any other outcome. */
export function verifiedOf(outcome: VerifyOutcome): VerifiedPayment {
  if (outcome.case !== 'verified') throw new Error(`expected a verified payment, got ${describe(outcome)}`);
  return outcome.value;
}

function describe(outcome: VerifyOutcome): string {
  return JSON.stringify(outcome, (_key, value: unknown) =>
    typeof value === 'bigint' ? value.toString() : value,
  );
}

/** The RpcError a call rejected with; throws when it resolved. */
export async function rpcErrorOf(call: Promise<unknown>): Promise<RpcError> {
  try {
    await call;
  } catch (error) {
    if (error instanceof RpcError) return error;
    throw error;
  }
  throw new Error('expected the call to fail');
}

/** Sets a model's fee as the contracts' owner (dev account 0); fee 0 disables it. */
export async function setModelFee(devnet: Devnet, model: string, feeWei: bigint): Promise<void> {
  const registry = connectJobRegistry(devnet.deployment.jobRegistryAddress, devnet.wallet(ACCOUNTS.owner));
  await (await registry.setModel(model, feeWei)).wait();
}

/** The service signer (payTo) grants or revokes the facilitator's delegate authorization. */
export async function setFacilitatorAuthorized(devnet: Devnet, authorized: boolean): Promise<void> {
  const registry = connectJobRegistry(devnet.deployment.jobRegistryAddress, devnet.wallet(ACCOUNTS.signer));
  await (
    await registry.setDelegateAuthorization(devnet.wallet(ACCOUNTS.facilitator).address, authorized)
  ).wait();
}
