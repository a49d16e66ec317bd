// Gas of the JobRegistry calls the service makes per completion, measured on anvil.
//   npm run bench -w @svc/contracts
// Each single-call flow runs twice: the first run pays for first-time storage (counters, balances going
// from zero); the second is the steady state a running service sees. Then jobs in batches
// (docs/protocol.md, Batches): B jobs of B payers in B sessions over two workers, submitted in one
// transaction with their prompts in one blob, committed in one transaction per worker and released in one,
// in the steady state, per completion, beside the figures before batching.
import { createECDH, randomBytes } from 'node:crypto';
import {
  Wallet,
  hexlify,
  keccak256,
  parseEther,
  type ContractTransactionResponse,
  type TransactionResponse,
} from 'ethers';
import { ChainClock, DevWallet, createDevProvider, sendWithBlobs, startAnvil } from '@svc/anvil';
import { jobRegistryInterface } from '../src/connect.js';
import { DEBIT_AUTHORIZATION_TYPES, debitDomain } from '../src/debitAuthorization.js';
import { deployContracts } from '../src/deploy.js';
import { modelIdOf } from '../src/modelId.js';

const MODEL = { name: 'llama3.2:1b', feeWei: 10n ** 15n };
const MODEL_ID = modelIdOf(MODEL.name);

const anvil = await startAnvil({ accounts: 5, warmBlobs: true, blockTimestampInterval: 1 });
const provider = createDevProvider(anvil.rpcUrl, anvil.chainId);
try {
  const [owner, service, user, worker, otherWorker] = anvil.accounts.map(
    (account) => new DevWallet(account.privateKey, provider),
  ) as [DevWallet, DevWallet, DevWallet, DevWallet, DevWallet];
  const deployment = await deployContracts(owner, { models: [MODEL] });
  const registry = deployment.jobRegistryAddress;
  const jobs = (signer: DevWallet) => deployment.jobRegistry.connect(signer);
  const parameters = await deployment.jobRegistry.parameters();

  /** Gas per call name, per run. */
  const gas = [new Map<string, bigint[]>(), new Map<string, bigint[]>()];
  let run = 0;
  async function measure(name: string, sent: Promise<ContractTransactionResponse | TransactionResponse>) {
    const receipt = await (await sent).wait();
    if (!receipt) throw new Error(`${name} was not mined`);
    const runGas = gas[run]!;
    runGas.set(name, [...(runGas.get(name) ?? []), receipt.gasUsed]);
    return receipt;
  }
  const sessionKey = () => {
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    return hexlify(ecdh.getPublicKey());
  };
  const withBlob = (
    signer: DevWallet,
    method: 'submitJobFor' | 'submitJobWithDebit' | 'reassignJob',
    args: unknown[],
  ) =>
    sendWithBlobs(
      signer,
      { to: registry, data: jobRegistryInterface.encodeFunctionData(method, [...args, 0, 0]) },
      1,
    );
  const idFrom = (receipt: Awaited<ReturnType<typeof measure>>, event: string, field: string): bigint => {
    for (const log of receipt.logs) {
      const parsed = jobRegistryInterface.parseLog(log);
      if (parsed?.name === event) return parsed.args[field] as bigint;
    }
    throw new Error(`no ${event}`);
  };
  async function openActiveSession(owner: DevWallet, by: DevWallet, sessionWorker: DevWallet) {
    const opened = await measure(
      'openSession',
      jobs(by).openSession(owner.address, MODEL_ID, sessionWorker.address),
    );
    const sessionId = idFrom(opened, 'SessionOpened', 'sessionId');
    await measure('claimSession', jobs(sessionWorker).claimSession(sessionId, sessionKey()));
    return sessionId;
  }

  for (const signer of [worker, otherWorker]) {
    await (
      await deployment.workerRegistry.connect(signer).register([MODEL_ID], { value: 10n ** 17n })
    ).wait();
  }
  await (await jobs(user).depositAndAuthorize(service.address, { value: 10n ** 18n })).wait();

  for (run = 0; run < 2; run++) {
    // Delegate path: the service submits for the user; the job completes and is released.
    const session = await openActiveSession(user, service, worker);
    const submitted = await measure(
      'submitJobFor',
      withBlob(service, 'submitJobFor', [
        user.address,
        session,
        await jobs(service).nextJobId(session),
        MODEL.feeWei,
      ]),
    );
    const jobId = idFrom(submitted, 'JobSubmitted', 'jobId');
    await measure('completeJob', jobs(worker).completeJob(jobId, keccak256(randomBytes(64))));

    // A failure retried in a new session.
    const failing = await measure(
      'submitJobFor',
      withBlob(service, 'submitJobFor', [
        user.address,
        session,
        await jobs(service).nextJobId(session),
        MODEL.feeWei,
      ]),
    );
    const failingId = idFrom(failing, 'JobSubmitted', 'jobId');
    await measure('failJob', jobs(worker).failJob(failingId));
    const retrySession = await openActiveSession(user, service, otherWorker);
    await measure('reassignJob', withBlob(service, 'reassignJob', [failingId, retrySession]));
    await measure('completeJob', jobs(otherWorker).completeJob(failingId, keccak256(randomBytes(64))));

    // x402: the service settles a payer's debit authorization in its own session.
    const serviceSession = await openActiveSession(service, service, worker);
    const auth = {
      payer: user.address,
      payTo: service.address,
      facilitator: service.address,
      maxAmount: MODEL.feeWei,
      deadline: BigInt((await provider.getBlock('latest'))!.timestamp + 300),
      nonce: hexlify(randomBytes(32)),
    };
    const signature = await user.signTypedData(
      debitDomain(anvil.chainId, registry),
      DEBIT_AUTHORIZATION_TYPES,
      auth,
    );
    const debited = await measure(
      'submitJobWithDebit',
      withBlob(service, 'submitJobWithDebit', [
        serviceSession,
        await jobs(service).nextJobId(serviceSession),
        auth,
        signature,
      ]),
    );
    const debitJobId = idFrom(debited, 'JobSubmitted', 'jobId');
    await measure('failJob', jobs(worker).failJob(debitJobId));
    await measure('refundJob', jobs(service).refundJob(debitJobId));

    // Delegate path in the service's own session (which the user cannot submit into or close). Left
    // Submitted: what follows costs the same as above.
    await measure(
      'submitJobFor, own session',
      withBlob(service, 'submitJobFor', [
        user.address,
        serviceSession,
        await jobs(service).nextJobId(serviceSession),
        MODEL.feeWei,
      ]),
    );

    await new ChainClock(provider).advance(Number(parameters.disputeWindow) + 1);
    await measure('releaseJob', jobs(service).releaseJob(jobId));
    await measure('releaseJob', jobs(service).releaseJob(failingId));
  }

  const order = [
    'openSession',
    'claimSession',
    'submitJobFor',
    'submitJobFor, own session',
    'submitJobWithDebit',
    'completeJob',
    'failJob',
    'reassignJob',
    'refundJob',
    'releaseJob',
  ];
  const range = (values: bigint[] = []) => {
    const sorted = [...values].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    const low = sorted[0];
    const high = sorted.at(-1);
    return low === high ? String(low) : `${low}-${high}`;
  };
  console.log(`JobRegistry gas on anvil (blob transactions: execution gas; each also uses 131072 blob gas)`);
  console.log(`${'call'.padEnd(28)}${'first run'.padStart(16)}${'steady state'.padStart(16)}`);
  for (const name of order) {
    console.log(
      `${name.padEnd(28)}${range(gas[0]!.get(name)).padStart(16)}${range(gas[1]!.get(name)).padStart(16)}`,
    );
  }

  // Batches. Before batching (main at 2bd9f92, the same flow one job per transaction): submitJobFor
  // 182,004 + completeJob 66,406 + releaseJob 45,872, and a whole blob per completion.
  const BEFORE = { submit: 182_004n, complete: 66_406n, release: 45_872n, blobGas: 131_072n };
  const BATCH_SIZES = [1, 4, 16, 32];
  const largest = Math.max(...BATCH_SIZES);
  const payers = Array.from(
    { length: largest },
    () => new DevWallet(Wallet.createRandom().privateKey, provider),
  );
  for (const payer of payers) {
    await (await owner.sendTransaction({ to: payer.address, value: parseEther('1') })).wait();
    await (await jobs(payer).depositAndAuthorize(service.address, { value: parseEther('0.5') })).wait();
  }
  run = 1; // sessions opened below count as steady state
  const sessions: { id: bigint; worker: DevWallet }[] = [];
  for (let i = 0; i < largest; i++) {
    const sessionWorker = i % 2 === 0 ? worker : otherWorker;
    sessions.push({ id: await openActiveSession(service, service, sessionWorker), worker: sessionWorker });
  }
  const batchOf = (calls: string[]) => jobRegistryInterface.encodeFunctionData('batch', [calls]);
  async function gasOf(sent: Promise<TransactionResponse>) {
    const receipt = await (await sent).wait();
    if (!receipt) throw new Error('not mined');
    if (receipt.logs.some((log) => jobRegistryInterface.parseLog(log)?.name === 'BatchCallFailed')) {
      throw new Error('a call of the batch failed');
    }
    return receipt.gasUsed;
  }
  /** One round of `size` completions; returns the gas of each phase over the round. */
  async function batchedRound(size: number) {
    const picked = sessions.slice(0, size);
    const ids = await Promise.all(picked.map((session) => jobs(service).nextJobId(session.id)));
    const submit = await gasOf(
      sendWithBlobs(
        service,
        {
          to: registry,
          data: batchOf(
            picked.map((session, i) =>
              jobRegistryInterface.encodeFunctionData('submitJobFor', [
                payers[i]!.address,
                session.id,
                ids[i]!,
                MODEL.feeWei,
                0,
                i,
              ]),
            ),
          ),
        },
        1,
      ),
    );
    let complete = 0n;
    for (const sessionWorker of [worker, otherWorker]) {
      const own = ids.filter((_, i) => picked[i]!.worker === sessionWorker);
      if (own.length === 0) continue;
      complete += await gasOf(
        sessionWorker.sendTransaction({
          to: registry,
          data: batchOf(
            own.map((id) =>
              jobRegistryInterface.encodeFunctionData('completeJob', [id, keccak256(randomBytes(64))]),
            ),
          ),
        }),
      );
    }
    await new ChainClock(provider).advance(Number(parameters.disputeWindow) + 1);
    const release = await gasOf(
      service.sendTransaction({
        to: registry,
        data: jobRegistryInterface.encodeFunctionData('releaseJobs', [ids]),
      }),
    );
    return { submit, complete, release };
  }
  await batchedRound(largest); // first-time storage (balances, earnings, counters)
  const perJob = (total: bigint, size: number) => (total + BigInt(size) / 2n) / BigInt(size);
  const fmt = (value: bigint) => value.toLocaleString('en-US');
  const ratio = (before: bigint, after: bigint) => `${(Number(before) / Number(after)).toFixed(1)}x`;
  const beforeTotal = BEFORE.submit + BEFORE.complete + BEFORE.release;
  console.log('');
  console.log('Per completion, steady state: B jobs of B payers in B sessions over 2 workers, one blob');
  console.log(
    `${'B'.padStart(4)}${'submit'.padStart(10)}${'complete'.padStart(10)}${'release'.padStart(10)}` +
      `${'total'.padStart(10)}${'blob gas'.padStart(10)}${'vs before'.padStart(11)}`,
  );
  console.log(
    `${'before'.padStart(4)}${fmt(BEFORE.submit).padStart(10)}${fmt(BEFORE.complete).padStart(10)}` +
      `${fmt(BEFORE.release).padStart(10)}${fmt(beforeTotal).padStart(10)}${fmt(BEFORE.blobGas).padStart(10)}`,
  );
  for (const size of BATCH_SIZES) {
    const round = await batchedRound(size);
    const submit = perJob(round.submit, size);
    const complete = perJob(round.complete, size);
    const release = perJob(round.release, size);
    const total = submit + complete + release;
    const blobGas = perJob(BEFORE.blobGas, size);
    console.log(
      `${String(size).padStart(4)}${fmt(submit).padStart(10)}${fmt(complete).padStart(10)}` +
        `${fmt(release).padStart(10)}${fmt(total).padStart(10)}${fmt(blobGas).padStart(10)}` +
        `${ratio(beforeTotal, total).padStart(11)}`,
    );
  }
  const sessionGas = gas[1]!.get('openSession')![0]! + gas[1]!.get('claimSession')![0]!;
  console.log(
    `Sessions: openSession + claimSession ${fmt(sessionGas)} gas each, shared by every job the session serves.`,
  );
} finally {
  provider.destroy();
  await anvil.stop();
}
