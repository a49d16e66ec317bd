// npm run test:cluster: the chart as it deploys, run as local processes from what it renders, under load
// and faults, then the invariants read from the chain, the database, Redis and Kafka. Exits 1 when
// anything did not hold. See docs/operations.md ("Verified on one machine").
import { generateKeyPairSync, randomBytes, randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startDevnet } from '@svc/devnet';
import { JsonRpcProvider, Network } from 'ethers';
import { Redis } from 'ioredis';
import pg from 'pg';
import { stringify } from 'yaml';
import { startOtlpReceiver } from '@svc/testkit/otlp-receiver';
import { renderChart, repoRoot } from './chart-pods.js';
import {
  canConnect,
  KAFKA_BROKER,
  POSTGRES_ADMIN_URL,
  redisUp,
  startKafka,
  startRedis,
  stopKafka,
  stopRedis,
  waitFor,
} from './environment.js';
import {
  checkConsumers,
  checkPayments,
  checkSlots,
  chainJobs,
  unsettledWork,
  type Violation,
} from './invariants.js';
import { Load, type CallRecord } from './load.js';
import { LocalCluster, type Pod } from './pods.js';
import { checkCallTrace, checkSpansKeepSecrets } from './traces.js';

const RELEASE = 'svc';
const NAMESPACE = 'svc-cluster';
const WALLETS = Number(process.env.CLUSTER_WALLETS ?? 20);
const DEPOSIT_WEI = 10n ** 18n;
const REDIS_DB = Number(process.env.CLUSTER_REDIS_DB ?? 13);
const started = Date.now();
const runId = randomBytes(4).toString('hex');
const keepRunDir = process.env.CLUSTER_KEEP === '1';
/** CLUSTER_FAULTS: run only the faults whose names contain one of these words (comma-separated; `none`). */
const ONLY_FAULTS = process.env.CLUSTER_FAULTS?.toLowerCase().split(',').filter(Boolean);

function log(message: string): void {
  process.stderr.write(`[cluster ${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${message}\n`);
}

async function preconditions(): Promise<void> {
  if (!(await canConnect(5432)))
    throw new Error('PostgreSQL is not up on 127.0.0.1:5432 (bash scripts/ensure-services.sh)');
  if (!redisUp()) throw new Error('Redis is not up on 127.0.0.1:6379 (bash scripts/ensure-services.sh)');
  if (!(await canConnect(9092)))
    throw new Error('Kafka is not up on 127.0.0.1:9092 (bash scripts/ensure-services.sh)');
}

function serviceTokenKeyPair(): { privateKey: string; publicKey: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return {
    privateKey: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKey: publicKey.export({ format: 'der', type: 'spki' }).toString('base64'),
  };
}

async function main(): Promise<number> {
  await preconditions();
  const runDir = mkdtempSync(join(tmpdir(), 'svc-cluster-'));
  log(`run directory ${runDir}`);
  const cleanups: Array<() => Promise<void> | void> = [];
  let failed = true;
  try {
    // --- The chain: a devnet with 2 s blocks, deployed as npm start's devnet is. ---------------------
    const devnet = await startDevnet({
      port: 0,
      blockTimeSeconds: 2,
      descriptionPath: join(runDir, 'devnet.json'),
    });
    cleanups.push(() => devnet.stop());
    const chain = devnet.description;
    const account = (role: string) => chain.accounts.filter((entry) => entry.role === role);
    const signer = account('service-signer')[0]!;
    const operators = account('operator');
    log(`devnet at ${chain.rpcUrl}, JobRegistry ${chain.contracts.jobRegistry}`);
    const network = Network.from(chain.chainId);
    const provider = new JsonRpcProvider(chain.rpcUrl, network, {
      staticNetwork: network,
      cacheTimeout: -1,
      pollingInterval: 500,
    });
    cleanups.push(() => provider.destroy());

    // --- A fresh database, a Redis DB index and a store namespace of the run's own. -------------------
    const database = `svc_cluster_${runId}`;
    const admin = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
    await admin.connect();
    await admin.query(`create database ${database}`);
    await admin.end();
    const databaseUrl = POSTGRES_ADMIN_URL.replace(/\/[^/]*$/, `/${database}`);
    cleanups.push(async () => {
      if (failed && keepRunDir) return log(`database ${database} kept`);
      const client = new pg.Client({ connectionString: POSTGRES_ADMIN_URL });
      await client.connect();
      await client.query(`drop database if exists ${database} with (force)`);
      await client.end();
    });
    const redisUrl = `redis://127.0.0.1:6379/${REDIS_DB}`;
    const storeNamespace = `svc-cluster-${runId}`;
    cleanups.push(() => (failed && keepRunDir ? undefined : dropNamespace(redisUrl, storeNamespace)));

    // --- A trace collector: every pod exports its spans to it (tracing.otlpEndpoint). -----------------
    const collector = await startOtlpReceiver();
    cleanups.push(() => collector.close());

    // --- The run's values: what exists only now, beside the suite's values file. ----------------------
    const gatewayToken = serviceTokenKeyPair();
    const orchestratorToken = serviceTokenKeyPair();
    const { privateKey: signinKey } = generateKeyPairSync('ed25519');
    const signingJwk = { ...signinKey.export({ format: 'jwk' }), kid: randomUUID(), alg: 'EdDSA' };
    const runValues = {
      chain: {
        rpcUrl: chain.rpcUrl,
        chainId: chain.chainId,
        jobRegistryAddress: chain.contracts.jobRegistry,
        workerRegistryAddress: chain.contracts.workerRegistry,
      },
      postgresql: { url: databaseUrl },
      redis: { url: redisUrl },
      global: { storeNamespace },
      serviceTokens: {
        publicKeys: { gateway: [gatewayToken.publicKey], jobOrchestrator: [orchestratorToken.publicKey] },
      },
      secrets: {
        gatewayServiceToken: { privateKey: gatewayToken.privateKey },
        jobOrchestratorServiceToken: { privateKey: orchestratorToken.privateKey },
        signin: { signingKey: JSON.stringify(signingJwk), apiKeyPepper: randomBytes(48).toString('base64') },
        signer: {
          privateKey: signer.privateKey,
          blobOperatorKeys: operators
            .slice(0, 2)
            .map((entry) => entry.privateKey)
            .join(','),
          plainOperatorKeys: operators
            .slice(2)
            .map((entry) => entry.privateKey)
            .join(','),
        },
        facilitator: {
          privateKey: account('facilitator')[0]!.privateKey,
          operatorKeys: account('facilitator-operator')
            .map((entry) => entry.privateKey)
            .join(','),
        },
        worker: { keystorePassword: randomBytes(16).toString('hex') },
      },
      paymentSettler: { payToAddress: signer.address },
      // Consumer groups of the run's own on the shared broker.
      keyService: { env: { LIFECYCLE_CONSUMER_GROUP: `cluster-${runId}.spend-settlement` } },
      gateway: { env: { V1_KEY_EVENTS_GROUP_PREFIX: `cluster-${runId}.gateway-key-cache` } },
      tracing: { otlpEndpoint: collector.endpoint },
    };
    const runValuesFile = join(runDir, 'run-values.yaml');
    writeFileSync(runValuesFile, stringify(runValues));
    const chart = renderChart(RELEASE, NAMESPACE, [join(import.meta.dirname, 'values.yaml'), runValuesFile]);
    log(`rendered ${chart.workloads.length} workloads and ${chart.services.length} Services`);

    const cluster = new LocalCluster(chart, {
      runDir,
      baseEnv: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TMPDIR: join(runDir, 'tmp') },
    });
    mkdirSync(join(runDir, 'tmp'), { recursive: true });
    cleanups.push(() => cluster.stopAll(15_000));
    await cluster.openServices();
    void cluster.probeLoop();

    // New workers log the address to fund (docs/operations.md): the operator funds it, as here.
    cluster.onLine = (pod, line) => {
      if (line.msg.startsWith('created a new worker key')) {
        const address = (JSON.parse(line.raw) as { worker: string }).worker;
        log(`${pod.name}: funding its new key ${address}`);
        void provider.send('anvil_setBalance', [address, '0x8AC7230489E80000']).catch(() => {});
      }
    };

    // --- The migration Job first (a pre-install hook), then every workload. --------------------------
    const migration = chart.workloads.find((workload) => workload.kind === 'Job');
    if (!migration) throw new Error('the chart rendered no migration Job');
    const migrate = await cluster.addPod(migration);
    const migrateCode = await migrate.exited;
    if (migrateCode !== 0)
      throw new Error(`the migration Job exited ${migrateCode}: ${join(migrate.dir, 'log.jsonl')}`);
    log('migration Job done');

    const deployments = chart.workloads.filter((workload) => workload.kind !== 'Job');
    for (const workload of deployments)
      for (let index = 0; index < workload.replicas; index++)
        await cluster.addPod(
          workload,
          workload.kind === 'StatefulSet' ? `${workload.name}-${index}` : undefined,
        );
    const allPods = () =>
      [...cluster.pods.values()].flat().filter((pod) => pod.live && pod.workload.kind !== 'Job');
    const readyIn = await waitFor('every replica ready', () => allPods().every((pod) => pod.ready), 180_000);
    log(`${allPods().length} replicas ready in ${(readyIn / 1000).toFixed(1)} s`);

    const gatewayService = chart.services.find((service) => service.name === `${RELEASE}-gateway`)!;
    const baseUrl = `http://${cluster.address(gatewayService.name, gatewayService.ports[0]!.port)}`;

    // --- Wallets: funded, deposited and authorized, signed in, a key each (some with a tight cap). ----
    const fee = BigInt(chain.models.find((model) => model.name === 'qwen2.5:0.5b')!.feeWei);
    const load = await Load.prepare({
      baseUrl,
      provider,
      jobRegistry: chain.contracts.jobRegistry,
      serviceSigner: signer.address,
      count: WALLETS,
      depositWei: DEPOSIT_WEI,
      capWei: (index) => (index % 5 === 4 ? fee * 3n : undefined),
    });
    log(`${WALLETS} wallets deposited, signed in and keyed`);
    // The first answer: workers linked, models listed.
    await waitFor(
      'a first answered call',
      async () =>
        (await load.call(load.wallets[0]!, 'key', true)).outcome === 'answered' ||
        (await new Promise((resolve) => setTimeout(resolve, 2_000)).then(() => false)),
      180_000,
    );

    // One streamed call, followed through the processes by its trace.
    const tracedCallId = `cluster-traced-${runId}`;
    await load.call(load.wallets[0]!, 'key', true, tracedCallId);
    const traceViolations = await checkCallTrace(collector, tracedCallId);
    log(
      traceViolations.length
        ? `trace of ${tracedCallId}: ${traceViolations[0]!.detail}`
        : `one trace for ${tracedCallId}`,
    );

    // --- Load, and the faults one after another. -------------------------------------------------------
    const phases: PhaseReport[] = [];
    // Start-up (replicas joining their consumer groups, the first calls) explains what it logs.
    faultLog.push({ name: 'start-up', from: 0, to: Date.now() });
    load.start();
    const phase = async (name: string, fault: () => Promise<void>, healed: () => Promise<boolean>) => {
      if (ONLY_FAULTS && !ONLY_FAULTS.some((part) => name.toLowerCase().includes(part))) return;
      load.phase = name;
      const faultAt = Date.now();
      log(`fault: ${name}`);
      await fault();
      const injectedMs = Date.now() - faultAt;
      // Healed also means the fault's consequences settled: the jobs running when it hit were let go (their
      // calls ended, or, a dead replica's, their marks lapsed and the job keeper took them over) and the
      // lifecycle outbox drained to Kafka. The next fault comes only then: faults in turn (a store lost
      // while either is under way loses it: docs/operations.md).
      const runningAtFault = new Set((await unsettledWork(redisUrl, storeNamespace)).running);
      const takenOver = async () => {
        const { running, outboxWaitMs } = await unsettledWork(redisUrl, storeNamespace);
        // Under load the outbox is never empty for long: drained means its relay keeps up again.
        return outboxWaitMs < 2_000 && running.every((mark) => !runningAtFault.has(mark));
      };
      const healMs = await waitFor(
        `${name} to heal`,
        async () => (await healed()) && (await takenOver()),
        240_000,
      );
      phases.push({ name, injectedMs, healMs });
      // Error lines up to a while after healing are the fault's (calls it broke end, sweepers run).
      faultLog.push({ name, from: faultAt, to: Date.now() + 10_000 });
      log(
        `${name}: injected in ${(injectedMs / 1000).toFixed(1)} s, healed ${(healMs / 1000).toFixed(1)} s later`,
      );
      // Calls keep going a while after healing, still counted in the phase.
      await new Promise((resolve) => setTimeout(resolve, 10_000));
    };
    const answeredSince = (since: number) => () =>
      Promise.resolve(load.calls.some((call) => call.outcome === 'answered' && call.startedAt > since));
    const allReady = () => Promise.resolve(allPods().every((pod) => pod.ready));
    const healthy = (since: () => number) => async () =>
      (await allReady()) && (await answeredSince(since())());

    load.phase = 'baseline';
    await new Promise((resolve) => setTimeout(resolve, 20_000));

    // 1. A job-orchestrator SIGKILLed while streams run through it.
    let mark = 0;
    await phase(
      'job-orchestrator SIGKILL',
      async () => {
        await waitFor(
          'a stream in flight',
          () => load.calls.some((call) => call.stream && call.endedAt === 0),
          30_000,
        );
        const victim = cluster.pods.get(`${RELEASE}-job-orchestrator`)![0]!;
        victim.kill('SIGKILL');
        mark = Date.now();
      },
      healthy(() => mark),
    );

    // 2. The Kafka broker restarted.
    await phase(
      'Kafka broker restart',
      async () => {
        await stopKafka();
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        startKafka();
        mark = Date.now();
      },
      healthy(() => mark),
    );

    // 3. Redis restarted: it keeps nothing, so this is also the store lost.
    await phase(
      'Redis restart (store lost)',
      async () => {
        stopRedis();
        await waitFor('Redis to stop', () => !redisUp(), 10_000);
        startRedis();
        await waitFor('Redis to start', () => redisUp(), 10_000);
        mark = Date.now();
      },
      healthy(() => mark),
    );

    // 4. A worker SIGKILLed mid-answer.
    await phase(
      'worker SIGKILL',
      async () => {
        await waitFor(
          'a stream in flight',
          () => load.calls.some((call) => call.stream && call.endedAt === 0),
          30_000,
        );
        cluster.pods.get(`${RELEASE}-worker`)![1]!.kill('SIGKILL');
        mark = Date.now();
      },
      healthy(() => mark),
    );

    // 5. Every deployment rolled one replica at a time: a new one ready, then the old one SIGTERMed.
    await phase(
      'rolling restart',
      async () => {
        for (const workload of deployments) {
          const current = (cluster.pods.get(workload.name) ?? []).filter((pod) => pod.live);
          for (const old of current) {
            let replacement: Pod | undefined;
            if (workload.kind === 'StatefulSet') {
              // A StatefulSet replaces an ordinal in place: the same name and volume.
              await old.terminate(graceMs(workload.env));
              old.live = true;
              old.start();
              replacement = old;
            } else {
              replacement = await cluster.addPod(workload);
              await waitFor(`${replacement.name} ready`, () => replacement!.ready, 120_000);
              await old.terminate(graceMs(workload.env));
            }
            await waitFor(`${replacement.name} ready`, () => replacement!.ready, 120_000);
          }
        }
        mark = Date.now();
      },
      healthy(() => mark),
    );

    load.phase = 'after';
    await new Promise((resolve) => setTimeout(resolve, 10_000));
    await load.stop();
    log(`load stopped: ${load.calls.length} calls`);

    // --- Quiet: jobs to their end (the chain's clock moved past deadlines), reservations settled. ------
    const jobsEnded = async () => {
      const jobs = await chainJobs(provider, chain.contracts.jobRegistry, chain.contracts.deploymentBlock);
      return jobs.every((job) => job.state !== 1 && job.state !== 3);
    };
    try {
      await waitFor('every job ended', jobsEnded, 30_000);
    } catch {
      log('jobs still running: moving the chain clock past their deadline for the job keeper');
      await provider.send('evm_increaseTime', [
        chain.parameters.protocol.jobTimeoutSeconds + chain.parameters.protocol.refundGraceSeconds + 5,
      ]);
      await waitFor('every job ended', jobsEnded, 120_000).catch((error: Error) => log(error.message));
    }
    await settle(databaseUrl);

    // --- Invariants. ------------------------------------------------------------------------------------
    const jobs = await chainJobs(provider, chain.contracts.jobRegistry, chain.contracts.deploymentBlock);
    const payments = await checkPayments({
      calls: load.calls,
      wallets: load.wallets,
      jobs,
      provider,
      jobRegistry: chain.contracts.jobRegistry,
      depositWei: DEPOSIT_WEI,
      databaseUrl,
      serviceSigner: signer.address,
    });
    // Calls that ended release their slots at once; give runs without an audience time to end too.
    let slots = await checkSlots(redisUrl, storeNamespace);
    for (let tries = 0; slots.length > 0 && tries < 15; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      slots = await checkSlots(redisUrl, storeNamespace);
    }
    const consumers = await checkConsumers(KAFKA_BROKER, (group) => group.startsWith(`cluster-${runId}`));
    const logs = unexplainedErrors(cluster);
    // The prompts of the load all start so; the keys are the wallets'.
    const secrets = ['hello from', ...load.wallets.flatMap((wallet) => (wallet.key ? [wallet.key] : []))];
    const violations: Violation[] = [
      ...payments.violations,
      ...slots,
      ...consumers.violations,
      ...logs,
      ...traceViolations,
      ...checkSpansKeepSecrets(collector, secrets),
    ];

    report({
      calls: load.calls,
      phases,
      counts: payments.counts,
      lag: consumers.lag,
      cluster,
      violations,
      runDir,
    });
    failed = violations.length > 0;
    return failed ? 1 : 0;
  } finally {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch (error) {
        log(`cleanup: ${(error as Error).message}`);
      }
    }
    // Whatever happened, the shared services are up again for whoever comes next.
    if (!redisUp()) startRedis();
    if (!(await canConnect(9092))) startKafka();
    if (!failed && !keepRunDir) rmSync(runDir, { recursive: true, force: true });
    else log(`logs kept in ${runDir}`);
  }
}

async function dropNamespace(redisUrl: string, namespace: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
  await redis.connect();
  try {
    const keys = await redis.keys(`${namespace}:*`);
    for (let index = 0; index < keys.length; index += 500) await redis.del(...keys.slice(index, index + 500));
  } finally {
    redis.disconnect();
  }
}

interface PhaseReport {
  name: string;
  /** From the fault's start until it was in place (a restart: the outage). */
  injectedMs: number;
  /** From then until every replica was ready and a call started after it was answered. */
  healMs: number;
}

function graceMs(env: Record<string, string>): number {
  // The pod's grace period: SHUTDOWN_TIMEOUT is set 5 s below it.
  const shutdown = /^(\d+)s$/.exec(env.SHUTDOWN_TIMEOUT ?? '')?.[1];
  return shutdown ? (Number(shutdown) + 5) * 1000 : 30_000;
}

async function settle(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await waitFor(
      'reservations settled',
      async () =>
        (
          await client.query<{ n: string }>(
            "select count(*)::text as n from spend_reservations where state = 'held'",
          )
        ).rows[0]!.n === '0',
      90_000,
    ).catch(() => {});
  } finally {
    await client.end();
  }
}

/** Error-level lines (and crashes) are explained only by a fault: within its window, on what it hit. */
function unexplainedErrors(cluster: LocalCluster): Violation[] {
  const windows = faultLog;
  return cluster.logLines
    .filter((line) => line.level >= 50)
    .filter((line) => !windows.some((window) => line.at >= window.from && line.at <= window.to))
    .map((line) => ({ invariant: 'no unexplained error log', detail: `${line.pod}: ${line.msg}` }));
}

const faultLog: Array<{ from: number; to: number; name: string }> = [];

function report(input: {
  calls: CallRecord[];
  phases: PhaseReport[];
  counts: Record<string, number | string>;
  lag: Record<string, number>;
  cluster: LocalCluster;
  violations: Violation[];
  runDir: string;
}): void {
  const out: string[] = [];
  const phaseNames = [...new Set(input.calls.map((call) => call.phase))];
  out.push('', `cluster suite: ${((Date.now() - started) / 1000).toFixed(0)} s in all`, '');
  out.push('calls by phase: made, answered, refused (by code), failed (by code); heal time');
  for (const name of phaseNames) {
    const calls = input.calls.filter((call) => call.phase === name);
    const by = (outcome: string) => calls.filter((call) => call.outcome === outcome);
    const codes = (list: CallRecord[]) => {
      const counts = new Map<string, number>();
      for (const call of list) counts.set(call.code ?? '?', (counts.get(call.code ?? '?') ?? 0) + 1);
      return [...counts].map(([code, n]) => `${code} ×${n}`).join(', ');
    };
    const heal = input.phases.find((phase) => phase.name === name);
    out.push(
      `  ${name.padEnd(28)} made ${String(calls.length).padStart(4)}  answered ${String(by('answered').length).padStart(4)}  ` +
        `refused ${by('refused').length}${by('refused').length ? ` (${codes(by('refused'))})` : ''}  ` +
        `failed ${by('failed').length}${by('failed').length ? ` (${codes(by('failed'))})` : ''}` +
        (heal
          ? `  outage ${(heal.injectedMs / 1000).toFixed(1)} s, healed ${(heal.healMs / 1000).toFixed(1)} s after`
          : ''),
    );
  }
  const payments = { key: 0, x402: 0, stream: 0, whole: 0 };
  for (const call of input.calls.filter((entry) => entry.outcome === 'answered')) {
    payments[call.payment]++;
    payments[call.stream ? 'stream' : 'whole']++;
  }
  out.push(
    '',
    `answered: ${payments.key} with a key, ${payments.x402} paid per call; ${payments.stream} streamed, ${payments.whole} whole`,
  );
  out.push('', 'counts:');
  for (const [name, value] of Object.entries(input.counts)) out.push(`  ${name}: ${value}`);
  out.push(
    '  consumer lag: ' +
      (Object.entries(input.lag)
        .map(([group, lag]) => `${group} ${lag}`)
        .join(', ') || 'no live groups'),
  );
  out.push('  connections per replica behind each Service:');
  for (const proxy of input.cluster.proxies)
    if (proxy.connections.size)
      out.push(
        `    ${proxy.service.name}: ${[...proxy.connections].map(([pod, n]) => `${pod} ${n}`).join(', ')}`,
      );
  const restarts = [...input.cluster.pods.values()].flat().filter((pod) => pod.restarts > 0);
  out.push(
    `  container restarts: ${restarts.map((pod) => `${pod.name} ${pod.restarts}`).join(', ') || 'none'}`,
  );
  out.push(
    '',
    input.violations.length ? `${input.violations.length} invariant violations:` : 'every invariant held',
  );
  for (const violation of input.violations) out.push(`  ${violation.invariant}: ${violation.detail}`);
  process.stdout.write(`${out.join('\n')}\n`);
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`cluster suite failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exit(1);
  },
);
void repoRoot;
