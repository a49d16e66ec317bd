import { createECDH } from 'node:crypto';
import { describe, expect, it } from '@jest/globals';
import { hexlify, keccak256, parseEther, toUtf8Bytes } from 'ethers';
import { sendWithBlobs } from '@svc/anvil';
import { connectJobRegistry, connectWorkerRegistry, modelIdOf, withDecodedRevert } from '@svc/contracts';
import { useDevnet } from '@svc/testkit';
import {
  ChainClient,
  ContractRevertError,
  JobState,
  ProtocolLogCursor,
  SessionState,
  commitRootOf,
  type ProtocolEvent,
} from '../src/index.js';
import { MODEL } from './support/models.js';

const devnet = useDevnet({ warmBlobs: true, models: [MODEL] });
const MODEL_ID = modelIdOf(MODEL.name);

function clientOf(): ChainClient {
  const { provider, deployment } = devnet();
  return new ChainClient({
    provider,
    jobRegistryAddress: deployment.jobRegistryAddress,
    workerRegistryAddress: deployment.workerRegistryAddress,
  });
}

function sessionPublicKey(): string {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return hexlify(ecdh.getPublicKey());
}

describe('ChainClient', () => {
  it('reads the deployed parameters once and serves them from its cache', async () => {
    const client = clientOf();
    const spy = { calls: 0 };
    const original = client.jobRegistry.parameters;
    Object.defineProperty(client.jobRegistry, 'parameters', {
      value: (...args: []) => {
        spy.calls += 1;
        return original(...args);
      },
    });
    const [first, second] = await Promise.all([client.parameters(), client.parameters()]);
    expect(first).toEqual(devnet().deployment.protocol);
    expect(second).toBe(first);
    expect(spy.calls).toBe(1);
    await client.refreshParameters();
    expect(spy.calls).toBe(2);
  });

  it('reads model fees, balances, delegate authorization and worker state as typed values', async () => {
    const { wallet, deployment } = devnet();
    const client = clientOf();
    const user = wallet(1);
    const service = wallet(2);
    const worker = wallet(3);
    await (
      await connectJobRegistry(deployment.jobRegistryAddress, user).depositAndAuthorize(service.address, {
        value: parseEther('0.5'),
      })
    ).wait();
    await (
      await connectWorkerRegistry(deployment.workerRegistryAddress, worker).register([MODEL_ID], {
        value: deployment.staking.minStakeWei,
      })
    ).wait();

    expect(await client.jobFee(MODEL_ID)).toBe(MODEL.feeWei);
    expect(await client.jobFee(modelIdOf('unknown-model'))).toBe(0n);
    expect(await client.delegatePosition(user.address, service.address)).toEqual({
      balance: parseEther('0.5'),
      authorized: true,
      allowance: parseEther('0.5'),
    });
    expect(await client.isDelegateAuthorized(user.address, worker.address)).toBe(false);
    expect(await client.isWorkerActive(worker.address)).toBe(true);
    expect(await client.workerServes(worker.address, MODEL_ID)).toBe(true);
    expect(await client.stakeOf(worker.address)).toBe(deployment.staking.minStakeWei);
    expect(await client.modelsOf(worker.address)).toEqual([MODEL_ID]);
    expect(await client.principalOf(user.address)).toBe(user.address);
    expect(await client.isPaused()).toBe(false);
  });

  it('maps sessions and jobs to typed records, and follows their events with a confirmed cursor', async () => {
    const { wallet, deployment, provider } = devnet();
    const client = clientOf();
    const owner = wallet(4);
    const worker = wallet(5);
    const startBlock = (await provider.getBlockNumber()) + 1;
    await (
      await connectWorkerRegistry(deployment.workerRegistryAddress, worker).register([MODEL_ID], {
        value: deployment.staking.minStakeWei,
      })
    ).wait();
    const opened = await (
      await connectJobRegistry(deployment.jobRegistryAddress, owner).openSession(
        owner.address,
        MODEL_ID,
        worker.address,
      )
    ).wait();
    const sessionId = BigInt(
      opened!.logs
        .map((log) => client.jobRegistry.interface.parseLog(log))
        .find((e) => e?.name === 'SessionOpened')!.args[0],
    );

    const open = await client.getSession(sessionId);
    expect(open).toMatchObject({
      sessionId,
      owner: owner.address,
      worker: worker.address,
      modelId: MODEL_ID,
    });
    expect(open.state).toBe(SessionState.Open);
    expect(typeof open.claimDeadline).toBe('number');

    const publicKey = sessionPublicKey();
    await (
      await connectJobRegistry(deployment.jobRegistryAddress, worker).claimSession(sessionId, publicKey)
    ).wait();
    const active = await client.getSession(sessionId);
    expect(active.state).toBe(SessionState.Active);
    expect(active.publicKey).toBe(publicKey);

    const missing = await client.getJob(999n);
    expect(missing.state).toBe(JobState.None);
    expect(missing.fee).toBe(0n);

    // Nothing is delivered until it has the confirmations asked for.
    const head = await provider.getBlockNumber();
    const confirmed = new ProtocolLogCursor({
      provider,
      addresses: client.addresses,
      fromBlock: startBlock,
      confirmations: head - startBlock + 2,
    });
    expect(await confirmed.next()).toBeNull();

    const cursor = new ProtocolLogCursor({
      provider,
      addresses: client.addresses,
      fromBlock: startBlock,
      confirmations: 0,
      maxBlockRange: 2,
      events: ['SessionOpened', 'SessionClaimed', 'WorkerRegistered'],
    });
    const events: ProtocolEvent[] = [];
    for (let batch = await cursor.next(); batch; batch = await cursor.next()) events.push(...batch.events);
    expect(cursor.nextBlock).toBe(head + 1);
    expect(events.map((event) => event.name)).toEqual([
      'WorkerRegistered',
      'SessionOpened',
      'SessionClaimed',
    ]);
    const [registered, openedEvent, claimed] = events;
    if (
      registered?.name !== 'WorkerRegistered' ||
      openedEvent?.name !== 'SessionOpened' ||
      claimed?.name !== 'SessionClaimed'
    ) {
      throw new Error('unexpected events');
    }
    expect(registered.args).toEqual({ worker: worker.address, stake: deployment.staking.minStakeWei });
    expect(openedEvent.args).toEqual({
      sessionId,
      owner: owner.address,
      modelId: MODEL_ID,
      worker: worker.address,
      claimDeadline: BigInt(open.claimDeadline),
    });
    expect(claimed.args).toEqual({ sessionId, worker: worker.address, sessionPublicKey: publicKey });
    expect(claimed.transactionHash).toMatch(/^0x[0-9a-f]{64}$/);
  });

  it("reads a job's commitment out of a shared commit batch: its hash and the batch, however far back", async () => {
    const { wallet, deployment, provider } = devnet();
    const client = clientOf();
    const user = wallet(7);
    const worker = wallet(8);
    const asUser = connectJobRegistry(deployment.jobRegistryAddress, user);
    await (await asUser.deposit({ value: parseEther('0.1') })).wait();
    await (
      await connectWorkerRegistry(deployment.workerRegistryAddress, worker).register([MODEL_ID], {
        value: deployment.staking.minStakeWei,
      })
    ).wait();
    const opened = await (await asUser.openSession(user.address, MODEL_ID, worker.address)).wait();
    const sessionId = BigInt(
      opened!.logs
        .map((log) => client.jobRegistry.interface.parseLog(log))
        .find((event) => event?.name === 'SessionOpened')!.args[0],
    );
    const asWorker = connectJobRegistry(deployment.jobRegistryAddress, worker);
    await (await asWorker.claimSession(sessionId, sessionPublicKey())).wait();
    const ids = [1n, 2n, 3n, 4n].map((sequence) => (sessionId << 32n) | sequence);
    const registry = client.jobRegistry.interface;
    const batch = (calls: string[]) => registry.encodeFunctionData('batch', [calls]);
    const submission = await sendWithBlobs(
      user,
      {
        to: deployment.jobRegistryAddress,
        data: batch(
          ids.map((id, index) =>
            registry.encodeFunctionData('submitJobFor', [
              user.address,
              sessionId,
              id,
              MODEL.feeWei,
              0,
              index,
            ]),
          ),
        ),
      },
      1,
    );
    const submitted = (await submission.wait())!;
    // Each job's prompt blob is named by its JobSubmitted (not kept in storage); the job keeps its place.
    for (const [index, id] of ids.entries()) {
      const job = await client.getJob(id);
      expect(job.promptIndex).toBe(index);
      for (const fromBlock of [undefined, submitted.blockNumber]) {
        expect(await client.promptPlaceOf(job, fromBlock)).toEqual({
          promptBlobHash: submission.blobVersionedHashes![0],
          promptIndex: index,
          blockNumber: submitted.blockNumber,
        });
      }
      // Looked for only from a later block: not found.
      expect(await client.promptPlaceOf(job, submitted.blockNumber + 1)).toBeUndefined();
    }
    // Three answers in one transaction; the fourth job stays unanswered.
    const answers = ['a', 'b', 'c'].map((text) => keccak256(toUtf8Bytes(text)));
    const committed = await (
      await worker.sendTransaction({
        to: deployment.jobRegistryAddress,
        data: batch(
          answers.map((hash, index) => registry.encodeFunctionData('completeJob', [ids[index]!, hash])),
        ),
      })
    ).wait();

    for (const [index, answer] of answers.entries()) {
      const job = await client.getJob(ids[index]!);
      expect(job).toMatchObject({ state: JobState.Completed, commitIndex: index });
      const commitment = await client.commitmentOf(job);
      expect(commitment).toEqual({
        responseHash: answer,
        transactionHash: committed!.hash,
        blockNumber: committed!.blockNumber,
      });
      expect(await client.commitBatchOf(job, commitment!)).toEqual(answers);
    }
    expect(commitRootOf(answers)).toBe(
      await client.jobRegistry.commitRoot((await client.getJob(ids[0]!)).commitBatch),
    );
    expect(await client.commitmentOf(await client.getJob(ids[3]!))).toBeUndefined();

    // More blocks since than one log window holds: found in an earlier window.
    await provider.send('anvil_mine', ['0x9c4']);
    const far = await client.commitmentOf(await client.getJob(ids[1]!));
    expect(far).toMatchObject({ responseHash: answers[1], transactionHash: committed!.hash });
  });

  it('surfaces a revert of a read as a ContractRevertError with the custom error and its args', async () => {
    const { wallet } = devnet();
    const client = clientOf();
    const stranger = wallet(6);
    // A static call of a write is a read that reverts: how a service pre-checks before sending.
    const failure = await withDecodedRevert(() =>
      client.jobRegistry.openSession.staticCall(stranger.address, MODEL_ID, stranger.address, {
        from: stranger.address,
      }),
    ).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ContractRevertError);
    expect((failure as ContractRevertError).revert).toEqual({
      name: 'WorkerNotActive',
      args: { worker: stranger.address },
    });
  });
});
