import { join } from 'node:path';
import { gatewayModule } from '@svc/gateway';
import { jobOrchestratorModule } from '@svc/job-orchestrator';
import { keyServiceModule } from '@svc/key-service';
import { paymentSettlerModule } from '@svc/payment-settler';
import {
  serviceTarget,
  type ServiceModule,
  type SharedDependencies,
  type Target,
  type Unit,
} from '@svc/runtime';
import { workerModule } from '@svc/worker';
import { localSecretSettings, localServiceTokenKeys } from './local-secrets.js';
import { writeStackFile } from './stack-file.js';

/**
 * Every service of the deployment, each a target of its own and all of them together in `all`. In any
 * order: the runner starts each after the peers it names (the job-orchestrator after the
 * payment-settler, the gateway after all three services it calls, the workers after the orchestrator).
 */
const services: readonly ServiceModule[] = [
  keyServiceModule,
  jobOrchestratorModule,
  paymentSettlerModule,
  gatewayModule,
  workerModule,
];
const serviceNames = services.map((module) => module.name);

/** The password of the all-in-one workers' session-key vaults: devnet keys are public anyway. */
const DEVNET_WORKER_PASSWORD = 'devnet';

/**
 * Everything on one machine (`npm start`): every service in this process, the devnet (unless RPC_URL
 * names a chain) and a reference worker for each of the devnet's worker accounts. On the devnet the
 * orchestrator sends as the devnet's service signer through its operators, and the payment-settler as
 * the devnet's facilitator through its operator, so per-call payments are taken out of the box.
 */
export const allInOne: Target = {
  name: 'all',
  allInOne: true,
  modules: services,
  services: serviceNames,
  // Internal gRPC and the worker link stay on loopback, on free ports: the gateway is the only thing users
  // reach, and the runner points the workers at the link once the orchestrator listens. Only here may the
  // settings that are unsafe to guess in a deployment default: the proxy trusted is loopback's, sign-in is
  // bound to PUBLIC_URL and the devnet's chain, and the secrets are kept under STATE_DIR.
  defaults: {
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: '0',
    WORKER_LINK_HOST: '127.0.0.1',
    WORKER_LINK_PORT: '0',
    TRUST_PROXY: 'loopback',
    METRICS_PORT: '0',
  },
  derive: (env, { stateDir }) => {
    // A PORT that is no port is the gateway's configuration check to name; the URL takes the default.
    const port = env.PORT !== undefined && /^[0-9]{1,5}$/.test(env.PORT) ? env.PORT : '8080';
    const publicUrl = env.PUBLIC_URL ?? `http://localhost:${port}`;
    return {
      PUBLIC_URL: publicUrl,
      SIWE_DOMAIN: new URL(publicUrl).host,
      SIWE_URI: publicUrl,
      ...localSecretSettings(env, stateDir),
    };
  },
  started: writeStackFile,
  // The launcher of `npm start` writes its log there while the server resets the rest.
  keptOnReset: ['logs'],
  units: ({ chain }, runtime): Unit[] => {
    const workerAccounts = chain?.devnet?.accounts.filter((account) => account.role === 'worker') ?? [];
    // Each calling service signs its service tokens with a key pair of its own (derive gave the public keys).
    const tokenKeys = localServiceTokenKeys(runtime.STATE_DIR);
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
      // The built-in model costs next to nothing per job: each worker runs as many jobs as it holds
      // sessions, so two workers serve 32 streams at once. A real model server sets its own CAPACITY.
      defaults: { KEYSTORE_PASSWORD: DEVNET_WORKER_PASSWORD, DETERMINISTIC_MODELS: models, CAPACITY: '16' },
    }));
    return [
      { module: keyServiceModule },
      {
        module: jobOrchestratorModule,
        defaults: {
          SERVICE_TOKEN_PRIVATE_KEY: tokenKeys['job-orchestrator'].privateKey,
          ...(chain?.devnet ? devnetServiceAccounts(chain.devnet.accounts) : {}),
          // A devnet that mines on demand answers at once: look for receipts and commits often.
          ...(chain?.devnet && chain.blockTimeSeconds === null
            ? { TX_POLL_INTERVAL: '25ms', JOB_POLL_INTERVAL: '50ms' }
            : {}),
        },
      },
      {
        module: paymentSettlerModule,
        defaults: {
          ...(chain?.devnet ? devnetFacilitatorAccounts(chain.devnet.accounts) : {}),
          ...(chain?.devnet && chain.blockTimeSeconds === null ? { TX_POLL_INTERVAL: '25ms' } : {}),
        },
      },
      { module: gatewayModule, defaults: { SERVICE_TOKEN_PRIVATE_KEY: tokenKeys.gateway.privateKey } },
      ...workers,
    ];
  },
};

/**
 * The devnet's service signer and its operators (the first two send blob transactions, the rest plain
 * ones), as the orchestrator's settings; the environment still wins.
 */
function devnetServiceAccounts(accounts: readonly DevnetAccount[]): Record<string, string> {
  const signer = accounts.find((account) => account.role === 'service-signer');
  const operators = accounts
    .filter((account) => account.role === 'operator')
    .map((account) => account.privateKey);
  if (!signer || operators.length < 2) return {};
  return {
    SERVICE_SIGNER_PRIVATE_KEY: signer.privateKey,
    BLOB_OPERATOR_PRIVATE_KEYS: operators.slice(0, 2).join(','),
    PLAIN_OPERATOR_PRIVATE_KEYS: operators.slice(2).join(','),
  };
}

/** The devnet's facilitator and its operator as the settler's settings, paying to the service signer. */
function devnetFacilitatorAccounts(accounts: readonly DevnetAccount[]): Record<string, string> {
  const signer = accounts.find((account) => account.role === 'service-signer');
  const facilitator = accounts.find((account) => account.role === 'facilitator');
  const operators = accounts.filter((account) => account.role === 'facilitator-operator');
  if (!signer || !facilitator) return {};
  return {
    FACILITATOR_PRIVATE_KEY: facilitator.privateKey,
    FACILITATOR_OPERATOR_PRIVATE_KEYS: operators.map((account) => account.privateKey).join(','),
    PAY_TO_ADDRESS: signer.address,
  };
}

type DevnetAccount = NonNullable<SharedDependencies['chain']['devnet']>['accounts'][number];

/**
 * Every target the runner knows, the one definition of them: `all`, or one service per process (what a
 * container runs), named after the service.
 */
export const targets: Readonly<Record<string, Target>> = {
  all: allInOne,
  ...Object.fromEntries(
    services.map((module) => [module.name, serviceTarget(module, { services: serviceNames })]),
  ),
};
