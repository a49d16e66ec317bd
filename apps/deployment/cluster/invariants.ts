// What must hold at the end, read from the chain, the database, Redis and Kafka.
import { connectJobRegistry, JobState } from '@svc/contracts';
import type { JsonRpcProvider } from 'ethers';
import { Redis } from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';
import pg from 'pg';
import type { CallRecord, LoadWallet } from './load.js';

export interface ChainJob {
  readonly id: bigint;
  readonly payer: string;
  readonly fee: bigint;
  readonly state: number;
  /** The delegate whose allowance paid (the service signer on the API-key path). */
  readonly delegate: string;
}

export async function chainJobs(
  provider: JsonRpcProvider,
  jobRegistry: string,
  fromBlock: number,
): Promise<ChainJob[]> {
  const registry = connectJobRegistry(jobRegistry, provider);
  const logs = await registry.queryFilter(registry.filters.JobSubmitted(), fromBlock);
  const ids = [...new Set(logs.map((log) => (log as unknown as { args: { jobId: bigint } }).args.jobId))];
  return Promise.all(
    ids.map(async (id) => {
      const job = await registry.getJob(id);
      return { id, payer: job.payer, fee: job.fee, state: Number(job.state), delegate: job.delegate };
    }),
  );
}

export interface Violation {
  readonly invariant: string;
  readonly detail: string;
}

export interface InvariantInput {
  readonly calls: readonly CallRecord[];
  readonly wallets: readonly LoadWallet[];
  readonly jobs: readonly ChainJob[];
  readonly provider: JsonRpcProvider;
  readonly jobRegistry: string;
  readonly depositWei: bigint;
  readonly databaseUrl: string;
  readonly serviceSigner: string;
}

/** The key-service's sweep of lapsed reservations runs every 15 s (RESERVATION_SWEEP_INTERVAL): its grace. */
const RESERVATION_SWEEP_GRACE_SECONDS = 30;

/** Charges, refunds, spend and caps; returns what did not hold and the counts. */
export async function checkPayments(
  input: InvariantInput,
): Promise<{ violations: Violation[]; counts: Record<string, number | string> }> {
  const violations: Violation[] = [];
  const registry = connectJobRegistry(input.jobRegistry, input.provider);
  const jobsById = new Map(input.jobs.map((job) => [job.id.toString(), job]));
  const charged = (job: ChainJob) =>
    job.state === JobState.Completed || job.state === JobState.Released || job.state === JobState.Submitted;

  const answered = input.calls.filter((call) => call.outcome === 'answered');
  const answeredJobIds = new Map<string, number>();
  for (const call of answered) {
    if (!call.jobId) {
      violations.push({ invariant: 'answered call names its job', detail: `${call.wallet} ${call.payment}` });
      continue;
    }
    answeredJobIds.set(call.jobId, (answeredJobIds.get(call.jobId) ?? 0) + 1);
    const job = jobsById.get(call.jobId);
    if (!job)
      violations.push({ invariant: 'answered call charged', detail: `job ${call.jobId} not on chain` });
    else if (!charged(job))
      violations.push({
        invariant: 'answered call charged',
        detail: `job ${call.jobId} ended in state ${job.state}`,
      });
  }
  for (const [jobId, count] of answeredJobIds)
    if (count > 1)
      violations.push({
        invariant: 'one job per answered call',
        detail: `job ${jobId} answered ${count} calls`,
      });

  const failedOnChain = input.jobs.filter((job) => job.state === JobState.Failed);
  for (const job of failedOnChain)
    violations.push({
      invariant: 'every failed job refunded',
      detail: `job ${job.id} is Failed, not Refunded`,
    });
  const stillRunning = input.jobs.filter((job) => job.state === JobState.Submitted);
  for (const job of stillRunning)
    violations.push({ invariant: 'every job ended', detail: `job ${job.id} still Submitted` });

  // Charged exactly once: what left each wallet's prepaid balance is the fees of its charged jobs. A job
  // charged whose call the client saw fail is counted (the call is spent once the worker answered on
  // chain, whoever saw the answer: docs/architecture.md, the job keeper), not a violation.
  const walletSet = new Set(input.wallets.map((entry) => entry.wallet.address.toLowerCase()));
  const chargedUnanswered = input.jobs.filter(
    (job) => walletSet.has(job.payer.toLowerCase()) && charged(job) && !answeredJobIds.has(job.id.toString()),
  );
  for (const entry of input.wallets) {
    const balance = await registry.prepaidBalanceOf(entry.wallet.address);
    const spent = input.depositWei - balance;
    const fees = input.jobs
      .filter((job) => job.payer.toLowerCase() === entry.wallet.address.toLowerCase() && charged(job))
      .reduce((sum, job) => sum + job.fee, 0n);
    if (spent !== fees)
      violations.push({
        invariant: 'balance moved by the charged fees',
        detail: `${entry.wallet.address}: ${spent} left the balance, charged fees ${fees}`,
      });
  }

  // Each key's spentWei is the fees of its answered jobs; no cap passed; no reservation held.
  const client = new pg.Client({ connectionString: input.databaseUrl });
  await client.connect();
  try {
    const keys = await client.query<{
      id: string;
      spent_wei: string;
      reserved_wei: string;
      spend_cap_wei: string | null;
      /** What the key's reservations still in their lifetime hold: reservedWei must be exactly that. */
      holding_wei: string;
    }>(
      `select id, spent_wei::text, reserved_wei::text, spend_cap_wei::text,
         (select coalesce(sum(amount_wei), 0) from spend_reservations r
           where r.key_id = api_keys.id and r.state = 'held')::text as holding_wei
       from api_keys`,
    );
    const signer = input.serviceSigner.toLowerCase();
    for (const key of keys.rows) {
      // A key's spend is the fees of the jobs charged on the API-key path (the signer's allowance) for
      // its wallet (one key per wallet here), as the chain has them.
      const wallet = input.wallets.find((entry) => entry.keyId === key.id)?.wallet.address.toLowerCase();
      const chargedJobs = input.jobs.filter(
        (job) => job.payer.toLowerCase() === wallet && job.delegate.toLowerCase() === signer && charged(job),
      );
      const fees = chargedJobs.reduce((sum, job) => sum + job.fee, 0n);
      if (BigInt(key.spent_wei) !== fees) {
        // The charged jobs no answered call names are where to look first (ids, states).
        const unnamed = chargedJobs
          .filter((job) => !answeredJobIds.has(job.id.toString()))
          .map((job) => `${job.id} (state ${job.state})`);
        violations.push({
          invariant: "key's spentWei is the fees of its charged jobs",
          detail: `${key.id}: spentWei ${key.spent_wei}, charged fees ${fees}; charged jobs no answered call names: ${unnamed.join(', ') || 'none'}`,
        });
      }
      if (key.spend_cap_wei !== null && BigInt(key.spent_wei) > BigInt(key.spend_cap_wei))
        violations.push({
          invariant: 'no cap passed',
          detail: `${key.id}: spent ${key.spent_wei} over cap ${key.spend_cap_wei}`,
        });
      if (BigInt(key.reserved_wei) !== BigInt(key.holding_wei))
        violations.push({
          invariant: "a key's reservedWei is what its held reservations hold",
          detail: `${key.id}: reservedWei ${key.reserved_wei}, held ${key.holding_wei}`,
        });
    }
    // A hold outlives its call only when nothing can tell how the call ended (its job-orchestrator died
    // before the submission was known): then its lifetime releases it, and the sweep must have.
    const lapsed = await client.query<{ n: string }>(
      `select count(*)::text as n from spend_reservations
        where state = 'held' and expires_at < now() - interval '${RESERVATION_SWEEP_GRACE_SECONDS} seconds'`,
    );
    if (lapsed.rows[0]!.n !== '0')
      violations.push({
        invariant: 'no reservation held past its lifetime',
        detail: `${lapsed.rows[0]!.n} held`,
      });
    const outbox = await client.query<{ n: string }>(
      'select count(*)::text as n from key_event_outbox where published_at is null',
    );
    if (outbox.rows[0]!.n !== '0')
      violations.push({ invariant: 'key-event outbox drained', detail: `${outbox.rows[0]!.n} unpublished` });
    return {
      violations,
      counts: {
        'jobs on chain': input.jobs.length,
        'jobs charged (completed or released)': input.jobs.filter(charged).length,
        'jobs refunded': input.jobs.filter((job) => job.state === JobState.Refunded).length,
        'jobs charged whose call the client saw fail': chargedUnanswered.length,
        'API keys': keys.rowCount ?? 0,
        reservations: (
          await client.query<{ n: string }>('select count(*)::text as n from spend_reservations')
        ).rows[0]!.n,
        'reservations still held within their lifetime': (
          await client.query<{ n: string }>(
            "select count(*)::text as n from spend_reservations where state = 'held'",
          )
        ).rows[0]!.n,
      },
    };
  } finally {
    await client.end();
  }
}

/**
 * What the job-orchestrators have yet to settle: the jobs some call (or a dead replica's call, until its
 * mark lapses) is running, and how long the oldest lifecycle event has waited in the outbox for Kafka
 * (0 when none: the outbox is a Redis stream, whose entry ids start with the time they were added).
 */
export async function unsettledWork(
  redisUrl: string,
  namespace: string,
): Promise<{ running: string[]; outboxWaitMs: number }> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
  try {
    await redis.connect();
    const [oldest] = await redis.xrange(`${namespace}:queue:{job-lifecycle-outbox}`, '-', '+', 'COUNT', 1);
    return {
      running: await redis.keys(`${namespace}:lock:jobs:running:*`),
      outboxWaitMs: oldest ? Math.max(0, Date.now() - Number(oldest[0].split('-')[0])) : 0,
    };
  } catch {
    // Redis is the fault being injected: nothing can be read, and nothing is held any more.
    return { running: [], outboxWaitMs: 0 };
  } finally {
    redis.disconnect();
  }
}

/** No concurrency lease, session lock or running mark outlives the calls. */
export async function checkSlots(redisUrl: string, namespace: string): Promise<Violation[]> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 });
  await redis.connect();
  const violations: Violation[] = [];
  try {
    const now = Date.now();
    for (const key of await redis.keys(`${namespace}:leases:*`)) {
      // The budget of sessions no job was submitted in is not a slot: the keeper closes those sessions.
      if (key.includes(':leases:sessions:unused:')) continue;
      const live = await redis.zcount(key, now, '+inf');
      if (live > 0) violations.push({ invariant: 'no slot leaked', detail: `${key}: ${live} live leases` });
    }
    for (const key of await redis.keys(`${namespace}:lock:*`)) {
      // Held for as long as their replicas live: the keeper's leadership, the outbox relay's turn.
      if (key.endsWith(':lock:keeper:leader') || key.endsWith(':lock:lifecycle-outbox:relay')) continue;
      violations.push({
        invariant: 'no session slot or running mark leaked',
        detail: `${key} held by ${await redis.get(key)}`,
      });
    }
  } finally {
    redis.disconnect();
  }
  return violations;
}

/** Every consumer group with members has consumed everything on its topics. */
export async function checkConsumers(
  broker: string,
  groups: (group: string) => boolean,
): Promise<{ violations: Violation[]; lag: Record<string, number> }> {
  const kafka = new Kafka({ brokers: [broker], clientId: 'cluster-suite', logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const violations: Violation[] = [];
  const lag: Record<string, number> = {};
  try {
    const listed = (await admin.listGroups()).groups.map((group) => group.groupId).filter(groups);
    const described = await admin.describeGroups(listed);
    for (const group of described.groups) {
      if (group.members.length === 0) continue; // a replica that is gone
      const offsets = await admin.fetchOffsets({ groupId: group.groupId });
      let total = 0;
      for (const topic of offsets) {
        const ends = await admin.fetchTopicOffsets(topic.topic);
        for (const partition of topic.partitions) {
          const end = Number(ends.find((entry) => entry.partition === partition.partition)?.high ?? 0);
          const at = Number(partition.offset);
          // No offset committed: the group joined after these events (it starts at the end).
          if (at >= 0) total += Math.max(0, end - at);
        }
      }
      lag[group.groupId] = total;
      if (total > 0)
        violations.push({ invariant: 'every consumer caught up', detail: `${group.groupId} lags ${total}` });
    }
  } finally {
    await admin.disconnect();
  }
  return { violations, lag };
}
