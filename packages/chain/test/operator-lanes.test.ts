import { describe, expect, it } from '@jest/globals';
import { Wallet, toUtf8Bytes } from 'ethers';
import { jobRegistryInterface } from '@svc/contracts';
import { MemoryStore } from '@svc/platform';
import { useDevnet, waitFor } from '@svc/testkit';
import {
  InMemorySentTransactionJournal,
  OperatorLanes,
  TransactionSender,
  blobSidecarOf,
  type AccountLease,
  type MinedTransaction,
} from '../src/index.js';

const devnet = useDevnet({ warmBlobs: true, snapshots: true });

const ONE_GWEI = 10n ** 9n;
/** The node's limit of pending blob transactions per account, and the lanes' default. */
const BLOB_SLOTS = 16;

/** Lets every promise that can settle now settle (several rounds of the event loop). */
async function settled(): Promise<void> {
  for (let round = 0; round < 10; round++) await new Promise((resolve) => setImmediate(resolve));
}

/** Acquires without awaiting, so a test can see whether the lease has been handed out yet. */
function pendingAcquire(lanes: OperatorLanes, lane: 'blob' | 'plain') {
  const state: { lease?: AccountLease } = {};
  const promise = lanes.acquire(lane).then((lease) => (state.lease = lease));
  return { state, promise };
}

function addressesOf(leases: readonly AccountLease[]): string[] {
  return leases.map((lease) => lease.account.address);
}

describe('OperatorLanes', () => {
  it('queues the 17th blob acquire on a single account until a lease is released, and a second release frees nothing', async () => {
    const account = Wallet.createRandom();
    const lanes = new OperatorLanes({ blob: [account], plain: [] });
    const leases = await Promise.all(Array.from({ length: BLOB_SLOTS }, () => lanes.acquire('blob')));
    const seventeenth = pendingAcquire(lanes, 'blob');
    const eighteenth = pendingAcquire(lanes, 'blob');
    await settled();
    expect(seventeenth.state.lease).toBeUndefined();

    leases[5]!.release();
    leases[5]!.release();
    await settled();
    expect(seventeenth.state.lease?.account).toBe(account);
    expect(eighteenth.state.lease).toBeUndefined();

    leases[0]!.release();
    expect((await eighteenth.promise).account).toBe(account);
  });

  it('keeps the lanes apart: a full blob lane does not hold up the plain lane', async () => {
    const lanes = new OperatorLanes({
      blob: [Wallet.createRandom()],
      plain: [Wallet.createRandom()],
      maxInFlightPerBlobAccount: 1,
    });
    await lanes.acquire('blob');
    const blocked = pendingAcquire(lanes, 'blob');
    const plain = await lanes.acquire('plain');
    await settled();
    expect(blocked.state.lease).toBeUndefined();
    expect(plain.account.address).toBe(lanes.accounts('plain')[0]!.address);
    await expect(new OperatorLanes({ blob: [], plain: [] }).acquire('blob')).rejects.toThrow(/no account/);
  });

  it('hands each lease to the least busy account of the lane', async () => {
    const [first, second] = [Wallet.createRandom(), Wallet.createRandom()];
    const lanes = new OperatorLanes({ plain: [first, second], blob: [] });
    const initial = [];
    for (let index = 0; index < 4; index++) initial.push(await lanes.acquire('plain'));
    expect(addressesOf(initial)).toEqual([first, second, first, second].map((wallet) => wallet.address));

    // The second account finishes both of its transactions: it takes the next two.
    initial[1]!.release();
    initial[3]!.release();
    const next = [await lanes.acquire('plain'), await lanes.acquire('plain'), await lanes.acquire('plain')];
    expect(addressesOf(next)).toEqual([second, second, first].map((wallet) => wallet.address));
  });

  it('serves queued callers first come, first served', async () => {
    const lanes = new OperatorLanes({
      blob: [Wallet.createRandom()],
      plain: [],
      maxInFlightPerBlobAccount: 1,
    });
    const held = await lanes.acquire('blob');
    const order: number[] = [];
    const waiters = [0, 1, 2].map((index) =>
      lanes.acquire('blob').then((lease) => {
        order.push(index);
        lease.release();
      }),
    );
    await settled();
    expect(order).toEqual([]);
    held.release();
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2]);
  });
});

describe('TransactionSender on OperatorLanes', () => {
  /** Mines a block at a time until `work` settles, as a chain with a block time would. */
  async function mineUntil<T>(work: Promise<T>): Promise<T> {
    let done = false;
    const finished = work.finally(() => {
      done = true;
    });
    while (!done) {
      await devnet().rpc('evm_mine');
      await Promise.race([
        finished.catch(() => undefined),
        new Promise((resolve) => setTimeout(resolve, 50)),
      ]);
    }
    return finished;
  }

  it('keeps 16 blob transactions of one account in flight and sends the 17th only once one of them is mined', async () => {
    const { wallet, provider, rpc } = devnet();
    const account = wallet(1);
    const journal = new InMemorySentTransactionJournal();
    const store = new MemoryStore();
    const sender = new TransactionSender({
      provider,
      nonces: store.nonces,
      journal,
      lanes: new OperatorLanes({ blob: [account], plain: [] }),
      maxFeePerBlobGas: ONE_GWEI,
      // Seventeen watchers polling every 25 ms would starve the two cores that sign the blobs.
      pollIntervalMs: 200,
    });
    const sidecar = blobSidecarOf(toUtf8Bytes('one of seventeen'));
    const firstNonce = await provider.getTransactionCount(account.address, 'latest');
    await rpc('evm_setAutomine', [false]);
    try {
      const sends = Array.from({ length: BLOB_SLOTS + 1 }, () =>
        sender.send({ to: account.address, blobs: [sidecar] }),
      );
      await waitFor(
        async () =>
          (await provider.getTransactionCount(account.address, 'pending')) === firstNonce + BLOB_SLOTS ||
          undefined,
        { what: '16 blob transactions in the pool' },
      );
      // However long nothing is mined, the 17th send holds no account and no nonce.
      await new Promise((resolve) => setTimeout(resolve, 250));
      expect(await journal.atNonce(account.address, firstNonce + BLOB_SLOTS)).toEqual([]);
      expect(await provider.getTransactionCount(account.address, 'pending')).toBe(firstNonce + BLOB_SLOTS);
      expect(await store.nonces.peek(account.address)).toBe(firstNonce + BLOB_SLOTS);

      const mined: MinedTransaction[] = await mineUntil(Promise.all(sends));

      expect(mined.map((result) => result.nonce).sort((a, b) => a - b)).toEqual(
        Array.from({ length: BLOB_SLOTS + 1 }, (_, index) => firstNonce + index),
      );
      const byNonce = new Map(mined.map((result) => [result.nonce, result.receipt.blockNumber]));
      const firstBlock = Math.min(...byNonce.values());
      expect(byNonce.get(firstNonce + BLOB_SLOTS)).toBeGreaterThan(firstBlock);
      expect(mined.every((result) => result.receipt.status === 1 && result.receipt.type === 3)).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('spreads concurrent sends evenly over the two accounts of a lane', async () => {
    const { wallet, provider, rpc, deployment } = devnet();
    const accounts = [wallet(2), wallet(3)];
    const store = new MemoryStore();
    const sender = new TransactionSender({
      provider,
      nonces: store.nonces,
      journal: new InMemorySentTransactionJournal(),
      lanes: new OperatorLanes({ plain: accounts, blob: [] }),
      maxFeePerBlobGas: ONE_GWEI,
      pollIntervalMs: 25,
    });
    const pendingCount = async () => {
      const counts = await Promise.all(
        accounts.map((account) => provider.getTransactionCount(account.address, 'pending')),
      );
      return counts.reduce((sum, count) => sum + count, 0);
    };
    const pendingBefore = await pendingCount();
    // No block until every send holds an account, so none finishes and frees its account early.
    await rpc('evm_setAutomine', [false]);
    try {
      const sends = Array.from({ length: 8 }, (_, index) =>
        sender.send({
          to: deployment.jobRegistryAddress,
          data: jobRegistryInterface.encodeFunctionData('deposit'),
          value: BigInt(index + 1),
        }),
      );
      await waitFor(async () => (await pendingCount()) === pendingBefore + 8 || undefined, {
        what: 'eight transactions in the pool',
      });
      const mined = await mineUntil(Promise.all(sends));

      const perAccount = accounts.map(
        (account) => mined.filter((result) => result.account === account.address).length,
      );
      expect(perAccount).toEqual([4, 4]);
      expect(mined.every((result) => result.receipt.from === result.account)).toBe(true);
    } finally {
      await store.close();
    }
  });
});
