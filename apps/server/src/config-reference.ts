// Writes docs/configuration.md from the services' config shapes, so the reference cannot drift from
// the code; `--check` fails when the committed file is stale (run by this package's tests).
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gatewayConfigShape } from '@svc/gateway';
import { jobOrchestratorConfigShape } from '@svc/job-orchestrator';
import { keyServiceConfigShape } from '@svc/key-service';
import { paymentSettlerConfigShape } from '@svc/payment-settler';
import { configReference, type ConfigShape } from '@svc/platform';
import { runtimeConfigShape } from '@svc/runtime';
import { workerConfigShape } from '@svc/worker';
import { format, resolveConfig } from 'prettier';

const target = fileURLToPath(new URL('../../../docs/configuration.md', import.meta.url));

const services: Array<{ name: string; about: string; shape: ConfigShape }> = [
  {
    name: 'runner (every target)',
    about:
      'Read by the runner whatever it runs (`--target all`, which `npm start` runs, or one service): logging, the process’s gRPC server, and the shared dependencies. Each dependency has an embedded default while its URL is unset: PGlite for DATABASE_URL, an in-memory store for REDIS_URL, an in-process bus for KAFKA_BROKERS, a local anvil devnet for RPC_URL (its DEVNET_* settings apply then; `npm run devnet` reads them too). `--reset` empties STATE_DIR.',
    shape: runtimeConfigShape,
  },
  {
    name: 'gateway',
    about: 'Public HTTP: `/api` sign-in, key and chain routes, `/v1`, health, and the web console at `/`.',
    shape: gatewayConfigShape,
  },
  {
    name: 'key-service',
    about: 'Sign-in, sign-in tokens, API keys, spend reservations (gRPC).',
    shape: keyServiceConfigShape,
  },
  {
    name: 'job-orchestrator',
    about:
      'Runs completions as JobRegistry jobs (gRPC `JobOrchestrator`), serves the worker link (`WorkerLink`) on a listener of its own (WORKER_LINK_HOST, WORKER_LINK_PORT) and keeps every submitted job moving to its end. The all-in-one target sends as the devnet’s service signer through its operators.',
    shape: jobOrchestratorConfigShape,
  },
  {
    name: 'payment-settler',
    about:
      'Per-call payments (x402 `prepaid-debit`, gRPC `PaymentSettler`): requirements, verification with nonce reservations, and the settlement that debits the payer and submits the job. Without FACILITATOR_PRIVATE_KEY the server takes no per-call payments. The all-in-one target settles as the devnet’s facilitator through its operator.',
    shape: paymentSettlerConfigShape,
  },
  {
    name: 'worker',
    about: 'The reference worker: registration, sessions, jobs, model backends, the worker link.',
    shape: workerConfigShape,
  },
];

async function render(): Promise<string> {
  const sections = services.map(
    ({ name, about, shape }) => `## ${name}\n\n${about}\n\n${configReference(shape)}\n`,
  );
  const markdown = [
    '# Configuration reference',
    '',
    'Every service reads its configuration from environment variables once, at start-up, and refuses to start',
    'with a list of every invalid value. Defaults run the all-in-one mode (`npm start`). Durations take',
    '`250ms`, `30s`, `5m`, `1h` or a number of milliseconds. This file is generated from the code by',
    '`npm run config:reference -w @svc/server`; the tests fail when it is stale.',
    '',
    ...sections,
  ].join('\n');
  // Formatted as the repository's prettier would, so the formatting gate and this check agree.
  return format(markdown, { ...(await resolveConfig(target)), parser: 'markdown' });
}

const rendered = await render();
if (process.argv.includes('--check')) {
  let committed = '';
  try {
    committed = readFileSync(target, 'utf8');
  } catch {
    // missing: stale
  }
  if (committed !== rendered) {
    process.stderr.write('docs/configuration.md is stale: run `npm run config:reference -w @svc/server`\n');
    process.exit(1);
  }
  process.stdout.write('docs/configuration.md is current\n');
} else {
  writeFileSync(target, rendered);
  process.stdout.write(`wrote ${target}\n`);
}
