import { afterAll, describe, expect, it } from '@jest/globals';
import { connectJobRegistry } from '@svc/contracts';
import { MemoryStore } from '@svc/platform';
import { testServiceClientOptions } from '@svc/platform/testing';
import { closeClient, createClient, GrpcStatus, RpcError } from '@svc/proto';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { useDevnet } from '@svc/testkit';
import type { PaymentSettlerInstance } from '../src/module.js';
import {
  ACCOUNTS,
  currentRequirements,
  DEPLOYED_MODELS,
  runSettler,
  startSettler,
} from './support/settler.js';

// Start-up checks of the per-call setup: a settler whose setup is incomplete does not start, and says
// exactly which transaction fixes it; once that transaction is sent, it starts. Nothing is prepared on
// this devnet beforehand.
const devnet = useDevnet({ models: DEPLOYED_MODELS, accounts: 14 });
const store = new MemoryStore();

afterAll(async () => {
  await store.close();
});

const registryAs = (index: number) =>
  connectJobRegistry(devnet().deployment.jobRegistryAddress, devnet().wallet(index));

/** The start-up failure of a settler with `env`. */
async function startFailure(env: Record<string, string>): Promise<string> {
  try {
    const running = await runSettler(devnet(), store, { GRPC_PORT: '0', ...env });
    await running.stop();
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  throw new Error('expected the settler not to start');
}

/** Starts a settler with `env`, checks it serves requirements naming its parties, and stops it. */
async function expectStarts(env: Record<string, string>, parties: { facilitator: string; payTo: string }) {
  const settler = await startSettler(devnet(), store, { GRPC_PORT: '0', ...env });
  try {
    const instance = settler.running.instances.get('payment-settler') as PaymentSettlerInstance;
    expect(instance.parts?.terms.parties).toMatchObject(parties);
    const requirements = await currentRequirements(settler.client);
    expect(requirements.payTo).toBe(parties.payTo);
    expect(requirements.extra.facilitatorAddress).toBe(parties.facilitator);
  } finally {
    await settler.stop();
  }
}

describe('the settler does not start, naming the fix,', () => {
  it('when PAY_TO_ADDRESS has not authorized the facilitator (setDelegateAuthorization); it starts once it has', async () => {
    const facilitator = devnet().wallet(ACCOUNTS.facilitator);
    const payTo = devnet().wallet(ACCOUNTS.signer).address;
    const env = { FACILITATOR_PRIVATE_KEY: facilitator.privateKey, PAY_TO_ADDRESS: payTo };
    const message = await startFailure(env);
    expect(message).toContain(`send setDelegateAuthorization(${facilitator.address}, true) from ${payTo}`);
    expect(message).toContain('PAY_TO_ADDRESS');

    await (await registryAs(ACCOUNTS.signer).setDelegateAuthorization(facilitator.address, true)).wait();
    await expectStarts(env, { facilitator: facilitator.address, payTo });

    // Revoked again, it refuses to start again.
    await (await registryAs(ACCOUNTS.signer).setDelegateAuthorization(facilitator.address, false)).wait();
    expect(await startFailure(env)).toContain('setDelegateAuthorization');
  });

  it('when an operator has no offer (setOperator, then acceptOperator), or has not accepted it (acceptOperator); it starts once it has', async () => {
    // The facilitator settles for itself (it is payTo): no delegate authorization is needed.
    const facilitator = devnet().wallet(ACCOUNTS.spareFacilitator);
    const operator = devnet().wallet(ACCOUNTS.spareOperator);
    const env = {
      FACILITATOR_PRIVATE_KEY: facilitator.privateKey,
      FACILITATOR_OPERATOR_PRIVATE_KEYS: operator.privateKey,
      PAY_TO_ADDRESS: facilitator.address,
    };
    const notOffered = await startFailure(env);
    expect(notOffered).toContain(
      `send setOperator(${operator.address}, true) from the facilitator, then acceptOperator(${facilitator.address}) from ${operator.address}`,
    );
    expect(notOffered).not.toContain('setDelegateAuthorization');

    await (await registryAs(ACCOUNTS.spareFacilitator).setOperator(operator.address, true)).wait();
    const notAccepted = await startFailure(env);
    expect(notAccepted).toContain('has not accepted');
    expect(notAccepted).toContain(`send acceptOperator(${facilitator.address}) from ${operator.address}`);
    expect(notAccepted).not.toContain('setOperator(');

    await (await registryAs(ACCOUNTS.spareOperator).acceptOperator(facilitator.address)).wait();
    await expectStarts(env, { facilitator: facilitator.address, payTo: facilitator.address });
  });

  it('listing every problem at once', async () => {
    const facilitator = devnet().wallet(ACCOUNTS.stranger);
    const payTo = devnet().wallet(ACCOUNTS.otherPayTo).address;
    const operators = [devnet().wallet(13), devnet().wallet(ACCOUNTS.funder)];
    const message = await startFailure({
      FACILITATOR_PRIVATE_KEY: facilitator.privateKey,
      FACILITATOR_OPERATOR_PRIVATE_KEYS: operators.map((operator) => operator.privateKey).join(','),
      PAY_TO_ADDRESS: payTo,
    });
    expect(message).toContain(`setDelegateAuthorization(${facilitator.address}, true) from ${payTo}`);
    for (const operator of operators)
      expect(message).toContain(`acceptOperator(${facilitator.address}) from ${operator.address}`);
  });

  it('when FACILITATOR_PRIVATE_KEY is set without PAY_TO_ADDRESS, or with one that is no address', async () => {
    const facilitator = devnet().wallet(ACCOUNTS.facilitator).privateKey;
    for (const env of [
      { FACILITATOR_PRIVATE_KEY: facilitator } as Record<string, string>,
      { FACILITATOR_PRIVATE_KEY: facilitator, PAY_TO_ADDRESS: '0x1234' },
      { FACILITATOR_PRIVATE_KEY: facilitator, PAY_TO_ADDRESS: 'alice.eth' },
    ]) {
      const message = await startFailure(env);
      expect(message).toContain('PAY_TO_ADDRESS');
      expect(message).toContain('FACILITATOR_PRIVATE_KEY');
    }
  });
});

describe('the settler starts', () => {
  it('without FACILITATOR_PRIVATE_KEY, whatever PAY_TO_ADDRESS says: no per-call payments, nothing checked', async () => {
    const running = await runSettler(devnet(), store, { GRPC_PORT: '0', PAY_TO_ADDRESS: 'not checked' });
    try {
      expect((running.instances.get('payment-settler') as PaymentSettlerInstance).parts).toBeUndefined();
    } finally {
      await running.stop();
    }
  });

  it('serving PaymentSettler to the gateway and the job-orchestrator only, each the methods it calls: another call is refused before any handler', async () => {
    const running = await runSettler(devnet(), store, { GRPC_PORT: '0' });
    const address = running.grpcAddress!;
    const clients = {
      anonymous: createClient(PaymentSettler, address),
      keyService: createClient(
        PaymentSettler,
        address,
        testServiceClientOptions('payment-settler', { as: 'key-service' }),
      ),
      gateway: createClient(PaymentSettler, address, testServiceClientOptions('payment-settler')),
      orchestrator: createClient(
        PaymentSettler,
        address,
        testServiceClientOptions('payment-settler', { as: 'job-orchestrator' }),
      ),
    };
    const verify = (client: (typeof clients)['gateway']) =>
      client.verifyPayment({ paymentSignature: 'e30', model: 'any' }).catch((error: unknown) => error);
    const settle = (client: (typeof clients)['gateway']) =>
      client.settlePayment({ reservationId: 'no-such-reservation' }).catch((error: unknown) => error);
    const statusOf = (outcome: unknown) => (outcome instanceof RpcError ? outcome.status : GrpcStatus.OK);
    try {
      for (const refused of [clients.anonymous, clients.keyService]) {
        const error = await verify(refused);
        expect(error).toBeInstanceOf(RpcError);
        expect((error as RpcError).status).toBe(GrpcStatus.UNAUTHENTICATED);
      }
      // Let through: the handler answers, refusing the payment (it is no payment at all).
      expect(await verify(clients.gateway)).toMatchObject({ outcome: { case: 'refused' } });
      // The gateway, which faces the internet, never settles; the job-orchestrator only settles.
      expect(statusOf(await settle(clients.gateway))).toBe(GrpcStatus.PERMISSION_DENIED);
      expect(statusOf(await verify(clients.orchestrator))).toBe(GrpcStatus.PERMISSION_DENIED);
      expect([GrpcStatus.PERMISSION_DENIED, GrpcStatus.UNAUTHENTICATED]).not.toContain(
        statusOf(await settle(clients.orchestrator)),
      );
    } finally {
      Object.values(clients).forEach((client) => closeClient(client));
      await running.stop();
    }
  });
});
