import { join } from 'node:path';
import { gatewayModule } from '@svc/gateway';
import { keyServiceModule } from '@svc/key-service';
import type { Target, Unit } from '@svc/runtime';
import { workerModule } from '@svc/worker';
import { localSecretSettings } from './local-secrets.js';

/** The password of the all-in-one workers' session-key vaults: devnet keys are public anyway. */
const DEVNET_WORKER_PASSWORD = 'devnet';

/**
 * Everything on one machine (`npm start`): every service in this process, the devnet (unless RPC_URL
 * names a chain) and a reference worker for each of the devnet's worker accounts.
 */
export const allInOne: Target = {
  name: 'all',
  allInOne: true,
  modules: [keyServiceModule, gatewayModule, workerModule],
  // Internal gRPC stays on loopback, on a free port: the gateway is the only thing users reach. Only here
  // may the settings that are unsafe to guess in a deployment default: the proxy trusted is loopback's,
  // sign-in is bound to PUBLIC_URL and the devnet's chain, and the secrets are kept under STATE_DIR.
  defaults: { GRPC_HOST: '127.0.0.1', GRPC_PORT: '0', TRUST_PROXY: 'loopback', METRICS_PORT: '0' },
  derive: (env, { stateDir }) => {
    const publicUrl = env.PUBLIC_URL ?? `http://localhost:${env.PORT ?? '8080'}`;
    return {
      PUBLIC_URL: publicUrl,
      SIWE_DOMAIN: new URL(publicUrl).host,
      SIWE_URI: publicUrl,
      ...localSecretSettings(env, stateDir),
    };
  },
  units: ({ chain }, runtime) => {
    const workerAccounts = chain?.devnet?.accounts.filter((account) => account.role === 'worker') ?? [];
    const models = chain?.devnet?.models.map((model) => model.name).join(',') ?? '';
    const workers: Unit[] = workerAccounts.map((account, index) => ({
      module: workerModule,
      name: `worker-${index + 1}`,
      env: {
        WORKER_PRIVATE_KEY: account.privateKey,
        DATA_DIR: join(runtime.STATE_DIR, 'workers', account.address),
        HEALTH_HOST: '127.0.0.1',
        HEALTH_PORT: '0',
      },
      defaults: { KEYSTORE_PASSWORD: DEVNET_WORKER_PASSWORD, DETERMINISTIC_MODELS: models },
    }));
    return [{ module: keyServiceModule }, { module: gatewayModule }, ...workers];
  },
};

/** Every target the runner knows: `all`, or one service per process (what a container runs). */
export const targets: Readonly<Record<string, Target>> = {
  all: allInOne,
  'key-service': { name: 'key-service', modules: [keyServiceModule] },
  gateway: { name: 'gateway', modules: [gatewayModule] },
  worker: { name: 'worker', modules: [workerModule] },
};
