import { describe, expect, it } from '@jest/globals';
import { Transaction, toQuantity, toUtf8Bytes, type Wallet } from 'ethers';
import {
  connectWorkerRegistry,
  jobRegistryInterface,
  modelIdOf,
  workerRegistryInterface,
} from '@svc/contracts';
import { MemoryStore } from '@svc/platform';
import { useDevnet, waitFor } from '@svc/testkit';
import {
  InMemorySentTransactionJournal,
  OperatorLanes,
  TransactionRevertedError,
  TransactionSender,
  blobSidecarOf,
  type SentTransactionRecord,
  type TransactionSenderOptions,
} from '../src/index.js';
import { MODEL } from './support/models.js';

const devnet = useDevnet({ warmBlobs: true, models: [MODEL], snapshots: true });

const ONE_GWEI = 10n ** 9n;
/** Long enough that the test's own steps never race the sender's replacement. */
const REPLACE_AFTER_MS = 1_500;

interface SenderUnderTest {
  readonly sender: TransactionSender;
  readonly journal: InMemorySentTransactionJournal;
  readonly store: MemoryStore;
}

function senderOf(
  accounts: { plain?: Wallet[]; blob?: Wallet[] },
  options: Partial<TransactionSenderOptions> = {},
): SenderUnderTest {
  const journal = new InMemorySentTransactionJournal();
  const store = new MemoryStore();
  const sender = new TransactionSender({
    provider: devnet().provider,
    nonces: store.nonces,
    journal,
    lanes: new OperatorLanes({ plain: accounts.plain ?? [], blob: accounts.blob ?? [] }),
    maxFeePerBlobGas: ONE_GWEI,
    pollIntervalMs: 25,
    ...options,
  });
  return { sender, journal, store };
}

/** The attempts at `nonce` once there are `count` of them, the newest known to the node. */
function attemptsAt(
  journal: InMemorySentTransactionJournal,
  account: Wallet,
  nonce: number,
  count: number,
): Promise<SentTransactionRecord[]> {
  return waitFor(
    async () => {
      const records = await journal.atNonce(account.address, nonce);
      if (records.length < count) return undefined;
      return (await devnet().provider.getTransaction(records[count - 1]!.hash)) ? records : undefined;
    },
    { what: `${count} attempt(s) at nonce ${nonce}` },
  );
}

function expectRaisedBy(
  replacement: SentTransactionRecord,
  original: SentTransactionRecord,
  percent: bigint,
) {
  expect(replacement.maxPriorityFeePerGas * 100n).toBeGreaterThanOrEqual(
    original.maxPriorityFeePerGas * (100n + percent),
  );
  expect(replacement.maxFeePerGas * 100n).toBeGreaterThanOrEqual(original.maxFeePerGas * (100n + percent));
}

describe('TransactionSender replacing a transaction the node holds but does not mine', () => {
  it('replaces a plain transaction still pending after blocks were mined without it, raising both caps by 10% or more', async () => {
    const { wallet, provider, rpc } = devnet();
    const account = wallet(1);
    const { sender, journal, store } = senderOf({ plain: [account] }, { replaceAfterMs: REPLACE_AFTER_MS });
    const nonce = await provider.getTransactionCount(account.address, 'latest');
    const blockGasLimit = (await provider.getBlock('latest'))!.gasLimit;
    await rpc('evm_setAutomine', [false]);
    try {
      const sending = sender.send({
        to: devnet().deployment.jobRegistryAddress,
        data: jobRegistryInterface.encodeFunctionData('deposit'),
        value: 7n,
      });
      const [original] = await attemptsAt(journal, account, nonce, 1);
      // Blocks keep coming, but none has room for the transaction: it stays pending, not dropped.
      const gasLimit = Transaction.from(original!.rawTransaction).gasLimit;
      await rpc('anvil_setBlockGasLimit', [toQuantity(gasLimit - 1n)]);
      const headBefore = await provider.getBlockNumber();
      await rpc('anvil_mine', [toQuantity(3)]);
      expect(await provider.getBlockNumber()).toBe(headBefore + 3);
      expect(await provider.getTransaction(original!.hash)).toMatchObject({ blockNumber: null });
      expect(await provider.getTransactionCount(account.address, 'latest')).toBe(nonce);
      await rpc('anvil_setBlockGasLimit', [toQuantity(blockGasLimit)]);

      const [, replacement] = await attemptsAt(journal, account, nonce, 2);
      await rpc('evm_mine');
      const mined = await sending;

      expect(replacement!.replaces).toBe(original!.hash);
      expect(replacement!.signedAtMs - original!.signedAtMs).toBeGreaterThanOrEqual(REPLACE_AFTER_MS);
      expectRaisedBy(replacement!, original!, 10n);
      expect(replacement!.maxFeePerBlobGas).toBeNull();
      expect(mined).toMatchObject({ account: account.address, nonce, replacedHashes: [original!.hash] });
      expect(mined.receipt.hash).toBe(replacement!.hash);
      expect(mined.receipt.status).toBe(1);
      expect(await provider.getTransactionReceipt(original!.hash)).toBeNull();
    } finally {
      await rpc('anvil_setBlockGasLimit', [toQuantity(blockGasLimit)]);
      await store.close();
    }
  });

  it('replaces a stuck blob transaction with its blob fee cap and both execution caps doubled', async () => {
    const { wallet, provider, rpc } = devnet();
    const account = wallet(2);
    const { sender, journal, store } = senderOf({ blob: [account] }, { replaceAfterMs: REPLACE_AFTER_MS });
    const nonce = await provider.getTransactionCount(account.address, 'latest');
    const sidecar = blobSidecarOf(toUtf8Bytes('a prompt that waits'));
    await rpc('evm_setAutomine', [false]);
    try {
      const sending = sender.send({ to: account.address, blobs: [sidecar] });
      const [original, replacement] = await attemptsAt(journal, account, nonce, 2);
      await rpc('evm_mine');
      const mined = await sending;

      expect(original!.maxFeePerBlobGas).not.toBeNull();
      expect(replacement!.maxFeePerBlobGas).toBe(original!.maxFeePerBlobGas! * 2n);
      expectRaisedBy(replacement!, original!, 100n);
      expect(replacement).toMatchObject({ lane: 'blob', replaces: original!.hash });
      const signed = Transaction.from(replacement!.rawTransaction);
      expect(signed.blobVersionedHashes).toEqual([sidecar.versionedHash]);
      expect(mined.receipt.hash).toBe(replacement!.hash);
      expect(mined.receipt.type).toBe(3);
      expect(mined.replacedHashes).toEqual([original!.hash]);
    } finally {
      await store.close();
    }
  });
});

describe('TransactionSender with a transaction that reverts when mined', () => {
  it('reports a call that passed simulation but reverted in its block as TransactionRevertedError with the decoded error', async () => {
    const { wallet, provider, rpc, deployment } = devnet();
    const owner = wallet(3);
    const worker = wallet(4);
    const modelId = modelIdOf(MODEL.name);
    await (
      await connectWorkerRegistry(deployment.workerRegistryAddress, worker).register([modelId], {
        value: deployment.staking.minStakeWei,
      })
    ).wait();
    const { sender, journal, store } = senderOf({ plain: [owner] });
    const nonce = await provider.getTransactionCount(owner.address, 'latest');
    await rpc('evm_setAutomine', [false]);
    try {
      const sending = sender
        .send({
          to: deployment.jobRegistryAddress,
          data: jobRegistryInterface.encodeFunctionData('openSession', [
            owner.address,
            modelId,
            worker.address,
          ]),
        })
        .catch((error: unknown) => error);
      const [attempt] = await attemptsAt(journal, owner, nonce, 1);
      // The worker leaves with a higher tip, so it is ordered ahead of the session in the same block.
      const leaving = await worker.sendTransaction({
        to: deployment.workerRegistryAddress,
        data: workerRegistryInterface.encodeFunctionData('deregister'),
        gasLimit: 100_000n,
        maxPriorityFeePerGas: attempt!.maxPriorityFeePerGas * 10n,
        maxFeePerGas: attempt!.maxFeePerGas * 10n,
      });
      await rpc('evm_mine');
      const failure = await sending;

      const block = await provider.getBlock('latest', false);
      expect(block?.transactions).toEqual([leaving.hash, attempt!.hash]);
      expect(failure).toBeInstanceOf(TransactionRevertedError);
      expect(failure).toMatchObject({
        account: owner.address,
        nonce,
        transactionHash: attempt!.hash,
        blockNumber: block!.number,
        revert: { name: 'WorkerNotActive', args: { worker: worker.address } },
      });
      expect((await provider.getTransactionReceipt(attempt!.hash))?.status).toBe(0);
    } finally {
      await store.close();
    }
  });

  it('reports a revert it cannot decode (out of gas) as TransactionRevertedError without a decoded error', async () => {
    const { wallet, provider } = devnet();
    const account = wallet(5);
    const { sender, store } = senderOf({ plain: [account] });
    const nonce = await provider.getTransactionCount(account.address, 'latest');
    try {
      // The simulation ignores the gas limit; the mined transaction runs out of it.
      const failure = await sender
        .send({
          to: devnet().deployment.jobRegistryAddress,
          data: jobRegistryInterface.encodeFunctionData('deposit'),
          value: 1n,
          gasLimit: 22_000n,
        })
        .catch((error: unknown) => error);

      expect(failure).toBeInstanceOf(TransactionRevertedError);
      expect(failure).toMatchObject({ account: account.address, nonce, revert: null });
      expect(await provider.getTransactionCount(account.address, 'latest')).toBe(nonce + 1);
    } finally {
      await store.close();
    }
  });
});
