import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  connectJobRegistry,
  fromParametersStruct,
  modelIdOf,
  toParametersStruct,
  type JobRegistry,
} from '@svc/contracts';
import { appErrorFromRpc, MemoryStore } from '@svc/platform';
import { GrpcStatus } from '@svc/proto';
import { PaymentRefusalCode } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { useDevnet } from '@svc/testkit';
import { paymentSignatureFor, signPayment } from '@svc/x402';
import type { PaymentSettlerInstance } from '../src/module.js';
import {
  ACCOUNTS,
  currentRequirements,
  DEPLOYED_MODELS,
  depositedWallet,
  DISABLED_MODEL,
  header,
  MODEL,
  perCallEnv,
  preparePerCallAccounts,
  refusalOf,
  REPRICED_MODEL,
  RESOURCE_URL,
  rpcErrorOf,
  setModelFee,
  startSettler,
  verifiedOf,
  verify,
  type Settler,
} from './support/settler.js';

// The requirements a settler states come from the chain; a settler without a facilitator takes no
// per-call payments. A job timeout other than the default shows maxTimeoutSeconds is read, not assumed.
const JOB_TIMEOUT_SECONDS = 97;
const devnet = useDevnet({
  models: DEPLOYED_MODELS,
  accounts: 14,
  protocol: { jobTimeoutSeconds: JOB_TIMEOUT_SECONDS },
});
const store = new MemoryStore();
let settler: Settler;
let bare: Settler;
let registry: JobRegistry;

beforeAll(async () => {
  await preparePerCallAccounts(devnet());
  registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, devnet().wallet(ACCOUNTS.owner));
  settler = await startSettler(devnet(), store, perCallEnv(devnet(), { CHAIN_CACHE_TTL: '1ms' }));
  bare = await startSettler(devnet(), store, { GRPC_PORT: '0' });
}, 60_000);

afterAll(async () => {
  await settler?.stop();
  await bare?.stop();
  await store.close();
});

/** The app error code a call failed with, as the gateway rebuilds it. */
async function appCodeOf(call: Promise<unknown>): Promise<{ code: string; status: GrpcStatus }> {
  const error = await rpcErrorOf(call);
  return { code: appErrorFromRpc(error).code, status: error.status };
}

describe('GetRequirements', () => {
  it("states the chain's terms: the model's fee, the job timeout, JobRegistry, the signer and the facilitator", async () => {
    const response = await settler.client.getRequirements({ model: MODEL.name, resourceUrl: RESOURCE_URL });
    const parameters = await registry.parameters();
    expect(Number(parameters.jobTimeout)).toBe(JOB_TIMEOUT_SECONDS);
    expect(response.x402Version).toBe(2);
    expect(response.resource).toMatchObject({ url: RESOURCE_URL, mimeType: 'application/json' });
    expect(response.resource?.description).not.toBe('');
    const requirements = response.requirements!;
    expect(requirements.scheme).toBe('prepaid-debit');
    expect(requirements.network).toBe(`eip155:${devnet().anvil.chainId}`);
    expect(requirements.amount?.decimal).toBe((await registry.jobFee(modelIdOf(MODEL.name))).toString());
    expect(requirements.amount?.decimal).toBe(MODEL.feeWei.toString());
    expect(requirements.maxTimeoutSeconds).toBe(Number(parameters.jobTimeout));
    expect(requirements.asset?.hex).toBe(devnet().deployment.jobRegistryAddress);
    expect(requirements.payTo?.hex).toBe(devnet().wallet(ACCOUNTS.signer).address);
    expect(requirements.extra?.name).toBe('JobRegistry');
    expect(requirements.extra?.version).toBe('1');
    expect(requirements.extra?.facilitatorAddress?.hex).toBe(devnet().wallet(ACCOUNTS.facilitator).address);

    const other = await settler.client.getRequirements({
      model: REPRICED_MODEL.name,
      resourceUrl: 'urn:other',
    });
    expect(other.resource?.url).toBe('urn:other');
    expect(other.requirements?.amount?.decimal).toBe(REPRICED_MODEL.feeWei.toString());
  });

  it('follows the chain: a new fee at once, a new job timeout once its cache lapses', async () => {
    const newFee = REPRICED_MODEL.feeWei * 3n;
    const before = fromParametersStruct(await registry.parameters());
    await setModelFee(devnet(), REPRICED_MODEL.name, newFee);
    await (await registry.setParameters(toParametersStruct({ ...before, jobTimeoutSeconds: 90 }))).wait();
    try {
      const requirements = await currentRequirements(settler.client, REPRICED_MODEL.name);
      expect(requirements.amount).toBe(newFee.toString());
      expect(requirements.maxTimeoutSeconds).toBe(90);
    } finally {
      await setModelFee(devnet(), REPRICED_MODEL.name, REPRICED_MODEL.feeWei);
      await (await registry.setParameters(toParametersStruct(before))).wait();
    }
    const restored = await currentRequirements(settler.client, REPRICED_MODEL.name);
    expect(restored.amount).toBe(REPRICED_MODEL.feeWei.toString());
    expect(restored.maxTimeoutSeconds).toBe(JOB_TIMEOUT_SECONDS);
  });

  it('are what a payer signs: a payment built from them verifies', async () => {
    const wallet = await depositedWallet(devnet());
    const held = verifiedOf(
      await verify(
        settler.client,
        await paymentSignatureFor(wallet, await currentRequirements(settler.client)),
      ),
    );
    expect(held.payer?.hex).toBe(wallet.address);
    await settler.client.releasePayment({ reservationId: held.reservationId });
  });

  it('of an unknown, unnamed or disabled model: NOT_FOUND model_not_found', async () => {
    for (const model of ['no-such-model:1', '', DISABLED_MODEL.name, MODEL.name.toUpperCase()]) {
      expect({
        model,
        ...(await appCodeOf(settler.client.getRequirements({ model, resourceUrl: RESOURCE_URL }))),
      }).toEqual({
        model,
        code: 'model_not_found',
        status: GrpcStatus.NOT_FOUND,
      });
    }
  });

  it('VerifyPayment naming an unknown model: model_not_found for a well-formed payment; a malformed one is refused with no requirements', async () => {
    const payment = await paymentSignatureFor(
      await depositedWallet(devnet()),
      await currentRequirements(settler.client),
    );
    expect((await appCodeOf(verify(settler.client, payment, { model: 'no-such-model:1' }))).code).toBe(
      'model_not_found',
    );
    const refusal = refusalOf(await verify(settler.client, 'not base64!', { model: 'no-such-model:1' }));
    expect(refusal.code).toBe(PaymentRefusalCode.INVALID_PAYLOAD);
    expect(refusal.currentRequirements).toBeUndefined();
    // Nothing was reserved by the failed call: the payment verifies for the right model.
    const held = verifiedOf(await verify(settler.client, payment));
    await settler.client.releasePayment({ reservationId: held.reservationId });
  });
});

describe('a settler without FACILITATOR_PRIVATE_KEY takes no per-call payments', () => {
  it('has no payment parts', () => {
    const instance = bare.running.instances.get('payment-settler') as PaymentSettlerInstance;
    expect(instance.parts).toBeUndefined();
    expect((settler.running.instances.get('payment-settler') as PaymentSettlerInstance).parts).toBeDefined();
  });

  it('GetRequirements: unsupported_scheme', async () => {
    expect(
      (await appCodeOf(bare.client.getRequirements({ model: MODEL.name, resourceUrl: RESOURCE_URL }))).code,
    ).toBe('unsupported_scheme');
  });

  it('VerifyPayment of a payload that does not decode, or is malformed: refused invalid_payload, with no requirements', async () => {
    const good = await signPayment(
      await depositedWallet(devnet()),
      await currentRequirements(settler.client),
    );
    const { x402Version: _version, ...unversioned } = good;
    for (const value of [
      'not base64!',
      header([1, 2]),
      header({ ...good, payload: { authorization: good.payload.authorization } }),
      // JSON, but no payment: no x402Version, or one that is not a number.
      Buffer.from('{"hello":1}', 'utf8').toString('base64'),
      header(unversioned),
      header({ ...good, x402Version: '2' }),
      // A version 2 payment whose scheme is missing or not a string.
      header({ ...good, accepted: { ...good.accepted, scheme: 7 } }),
    ]) {
      const refusal = refusalOf(await verify(bare.client, value));
      expect(refusal.code).toBe(PaymentRefusalCode.INVALID_PAYLOAD);
      expect(refusal.payer).toBeUndefined();
      expect(refusal.currentRequirements).toBeUndefined();
    }
  });

  it('VerifyPayment of version 1: refused invalid_x402_version', async () => {
    const good = await signPayment(
      await depositedWallet(devnet()),
      await currentRequirements(settler.client),
    );
    for (const value of [{ x402Version: 1 }, { ...good, x402Version: 1 }]) {
      const refusal = refusalOf(await verify(bare.client, header(value)));
      expect(refusal.code).toBe(PaymentRefusalCode.INVALID_X402_VERSION);
      expect(refusal.currentRequirements).toBeUndefined();
    }
  });

  it('VerifyPayment of a well-formed payment, or of another scheme: unsupported_scheme', async () => {
    const good = await signPayment(
      await depositedWallet(devnet()),
      await currentRequirements(settler.client),
    );
    // The very payment a settler that takes payments verifies.
    expect((await appCodeOf(verify(bare.client, header(good)))).code).toBe('unsupported_scheme');
    expect(
      (
        await appCodeOf(
          verify(bare.client, header({ ...good, accepted: { ...good.accepted, scheme: 'exact' } })),
        )
      ).code,
    ).toBe('unsupported_scheme');
    const held = verifiedOf(await verify(settler.client, header(good)));
    await settler.client.releasePayment({ reservationId: held.reservationId });
  });

  it('SettlePayment and ReleasePayment: unsupported_scheme', async () => {
    expect(
      (
        await appCodeOf(
          bare.asOrchestrator.settlePayment({
            reservationId: 'r',
            sessionId: '1',
            promptWire: new Uint8Array([1]),
            requestId: 't',
          }),
        )
      ).code,
    ).toBe('unsupported_scheme');
    expect((await appCodeOf(bare.client.releasePayment({ reservationId: 'r' }))).code).toBe(
      'unsupported_scheme',
    );
  });
});
