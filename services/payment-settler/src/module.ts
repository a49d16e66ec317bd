import { connectChain, countKzgWork, kzgThreads } from '@svc/chain';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { serviceCallers } from '@svc/platform';
import { defineModule, type ServiceInstance } from '@svc/runtime';
import { paymentSettlerConfigShape } from './config.js';
import { paymentSettlerHandlers, type PaymentSettlerParts } from './payment-settler-service.js';
import { buildPaymentSettler, verifyFacilitatorSetup } from './service.js';

/** A payment-settler; its parts, built before it starts (undefined: no per-call payments). */
export interface PaymentSettlerInstance extends ServiceInstance {
  readonly parts: PaymentSettlerParts | undefined;
}

/**
 * The payment-settler as the runner runs it: serves PaymentSettler on the process's gRPC server, with
 * nonce reservations and transaction nonces in the shared store and settlements sent as the facilitator.
 */
export const paymentSettlerModule = defineModule({
  name: 'payment-settler',
  configShape: paymentSettlerConfigShape,
  needs: ['store', 'chain', 'grpc', 'metrics'],
  build(config, { store, chain, grpc, metrics, logger }): PaymentSettlerInstance {
    // Its own provider with no call cache: reads right after a write must see it. Nothing here reaches
    // the network (or holds anything open): the provider connects on its first call.
    const { provider, client } = connectChain(chain);
    const parts = buildPaymentSettler({
      config,
      store,
      chain: client,
      provider,
      chainId: BigInt(chain.chainId),
      logger,
      metrics,
    });
    return {
      parts,
      async start() {
        // The KZG threads load their trusted setups (seconds) now rather than on the first settlement.
        if (parts) {
          kzgThreads.warmUp();
          countKzgWork(metrics);
        }
        if (parts) await verifyFacilitatorSetup(config, parts, client);
        else logger.warn('FACILITATOR_PRIVATE_KEY is not set: this server takes no per-call payments');
        grpc.add(PaymentSettler, paymentSettlerHandlers(parts), {
          authenticate: serviceCallers(config, { service: 'payment-settler', grpcService: PaymentSettler }),
        });
        logger.info(
          {
            facilitator: parts?.terms.parties.facilitator ?? null,
            payTo: parts?.terms.parties.payTo ?? null,
          },
          'payment-settler serving PaymentSettler',
        );
      },
      async stop() {
        // Settlements answered at broadcast are still being sent: they finish (or the process's shutdown
        // timeout ends them) before the chain goes away, so their outcome is recorded for the next ask.
        await parts?.settlement.drain();
        provider.destroy();
      },
    };
  },
});
