import { afterAll, describe, expect, it } from '@jest/globals';
import { Transaction, toUtf8Bytes, type Wallet } from 'ethers';
import { connectJobRegistry, jobRegistryInterface, modelIdOf } from '@svc/contracts';
import { MemoryStore, type NonceAllocator } from '@svc/platform';
import { createTestStore } from '@svc/platform/testing';
import { useDevnet, waitFor, waitUntil } from '@svc/testkit';
import {
  BlobFeeTooHighError,
  ContractRevertError,
  InMemorySentTransactionJournal,
  provingBlobSidecarOf,
  OperatorLanes,
  TransactionSender,
  blobSidecarOf,
  type SentTransactionJournal,
  type TransactionSenderOptions,
} from '../src/index.js';
import { MODEL } from './support/models.js';

const devnet = useDevnet({ warmBlobs: true, models: [MODEL] });
const ONE_GWEI = 10n ** 9n;

function senderOf(
  accounts: { plain: Wallet[]; blob: Wallet[] },
  nonces: NonceAllocator,
  journal: SentTransactionJournal,
  options: Partial<TransactionSenderOptions> = {},
): TransactionSender {
  return new TransactionSender({
    provider: devnet().provider,
    nonces,
    journal,
    lanes: new OperatorLanes(accounts),
    maxFeePerBlobGas: ONE_GWEI,
    pollIntervalMs: 25,
    ...options,
  });
}

function depositCall(value: bigint) {
  return {
    to: devnet().deployment.jobRegistryAddress,
    data: jobRegistryInterface.encodeFunctionData('deposit'),
    value,
  };
}

async function concurrentDeposits(account: Wallet, store: { nonces: NonceAllocator }): Promise<void> {
  const { provider, deployment } = devnet();
  const registry = connectJobRegistry(deployment.jobRegistryAddress, provider);
  const journal = new InMemorySentTransactionJournal();
  const balanceBefore = await registry.prepaidBalanceOf(account.address);
  const nonceBefore = await provider.getTransactionCount(account.address, 'latest');
  // Two replicas: separate senders (and lanes) over one account, one store, one journal.
  const replicas = [0, 1].map(() => senderOf({ plain: [account], blob: [] }, store.nonces, journal));
  const mined = await Promise.all(
    Array.from({ length: 20 }, (_, index) => replicas[index % 2]!.send(depositCall(BigInt(index + 1)))),
  );

  const nonces = mined.map((result) => result.nonce).sort((a, b) => a - b);
  expect(nonces).toEqual(Array.from({ length: 20 }, (_, index) => nonceBefore + index));
  expect(mined.every((result) => result.receipt.status === 1 && result.account === account.address)).toBe(
    true,
  );
  expect(await registry.prepaidBalanceOf(account.address)).toBe(balanceBefore + 210n);
  expect(await provider.getTransactionCount(account.address, 'latest')).toBe(nonceBefore + 20);
}

describe('TransactionSender', () => {
  it('mines 20 concurrent sends of two replicas sharing one account and a MemoryStore, each at its own nonce', async () => {
    const store = new MemoryStore();
    try {
      await concurrentDeposits(devnet().wallet(1), store);
    } finally {
      await store.close();
    }
  });

  describe('with a RedisStore', () => {
    const redis = createTestStore('test:chain:tx-sender');
    afterAll(() => redis.cleanup());

    it('mines 20 concurrent sends of two replicas sharing one account, each at its own nonce', async () => {
      await concurrentDeposits(devnet().wallet(2), redis.open());
    });
  });

  it('refuses a reverting call with its typed error before anything is signed or paid', async () => {
    const { wallet, provider } = devnet();
    const account = wallet(3);
    const journal = new InMemorySentTransactionJournal();
    const store = new MemoryStore();
    const sender = senderOf({ plain: [account], blob: [] }, store.nonces, journal);
    const nonceBefore = await provider.getTransactionCount(account.address, 'latest');
    const modelId = modelIdOf(MODEL.name);
    const failure = await sender
      .send({
        to: devnet().deployment.jobRegistryAddress,
        data: jobRegistryInterface.encodeFunctionData('openSession', [
          account.address,
          modelId,
          account.address,
        ]),
      })
      .catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(ContractRevertError);
    expect((failure as ContractRevertError).revert).toEqual({
      name: 'WorkerNotActive',
      args: { worker: account.address },
    });
    expect(await provider.getTransactionCount(account.address, 'pending')).toBe(nonceBefore);
    expect(await store.nonces.peek(account.address)).toBeNull();
    expect(await journal.atNonce(account.address, nonceBefore)).toEqual([]);
    await store.close();
  });

  it('sends blob transactions from the blob lane and plain ones from the plain lane', async () => {
    const { wallet } = devnet();
    const plain = wallet(4);
    const blob = wallet(5);
    const store = new MemoryStore();
    const sender = senderOf(
      { plain: [plain], blob: [blob] },
      store.nonces,
      new InMemorySentTransactionJournal(),
    );
    const sidecar = blobSidecarOf(toUtf8Bytes('lane test'));
    const [blobSent, plainSent] = await Promise.all([
      sender.send({ to: blob.address, blobs: [sidecar] }),
      sender.send({ to: plain.address, value: 1n }),
    ]);
    expect(blobSent.receipt.from).toBe(blob.address);
    expect(blobSent.receipt.type).toBe(3);
    expect(plainSent.receipt.from).toBe(plain.address);
    expect(plainSent.receipt.type).toBe(2);
    expect(() => new OperatorLanes({ plain: [plain], blob: [plain] })).toThrow(/only one lane/);
    await store.close();
  });

  it('tells onSigned once, before the transaction is mined, its hash and sidecar-free signed form', async () => {
    const { wallet, provider } = devnet();
    const blob = wallet(5);
    const store = new MemoryStore();
    const sender = senderOf(
      { plain: [wallet(4)], blob: [blob] },
      store.nonces,
      new InMemorySentTransactionJournal(),
    );
    const told: { hash: string; signedTransaction: string; minedYet: boolean }[] = [];
    await provider.send('evm_setAutomine', [false]);
    let sending: ReturnType<TransactionSender['send']> | undefined;
    try {
      sending = sender.send({
        to: blob.address,
        blobs: [blobSidecarOf(toUtf8Bytes('told before mined'))],
        onSigned: (signed) => told.push({ ...signed, minedYet: false }),
      });
      await waitUntil(
        async () => told.length,
        (count) => count > 0,
        { what: 'onSigned told', timeoutMs: 10_000 },
      );
      expect(await provider.getTransactionReceipt(told[0]!.hash)).toBeNull();
      await provider.send('evm_mine', []);
    } finally {
      await provider.send('evm_setAutomine', [true]);
    }
    const mined = await sending!;
    expect(told).toHaveLength(1);
    expect(mined.receipt.hash).toBe(told[0]!.hash);
    const parsed = Transaction.from(told[0]!.signedTransaction);
    expect(parsed.hash).toBe(told[0]!.hash);
    expect(parsed.blobs).toBeNull();
    await store.close();
  });

  it('hands a blob transaction out signed before its proof exists, and records and broadcasts it with the proof', async () => {
    const { wallet, provider } = devnet();
    const blob = wallet(5);
    const store = new MemoryStore();
    const journal = new InMemorySentTransactionJournal();
    const sender = senderOf({ plain: [wallet(4)], blob: [blob] }, store.nonces, journal);
    const proving = await provingBlobSidecarOf(toUtf8Bytes('signed before proved'));
    let proved!: (proof: Uint8Array) => void;
    const told: string[] = [];
    const sending = sender.send({
      to: blob.address,
      blobs: [{ ...proving, proof: new Promise<Uint8Array>((resolve) => (proved = resolve)) }],
      onSigned: (signed) => told.push(signed.hash),
    });
    await waitUntil(
      async () => told.length,
      (count) => count > 0,
      { what: 'onSigned told', timeoutMs: 10_000 },
    );
    // Signed and told, yet neither recorded nor sent: the proof is still to come.
    const nonce = await provider.getTransactionCount(blob.address, 'pending');
    expect(await journal.atNonce(blob.address, nonce)).toEqual([]);
    expect(await provider.getTransaction(told[0]!)).toBeNull();
    proved(await proving.proof);
    const mined = await sending;
    expect(mined.receipt.hash).toBe(told[0]);
    expect((await journal.atNonce(blob.address, mined.nonce)).map((record) => record.hash)).toEqual([
      told[0],
    ]);
    expect(mined.receipt.blobGasUsed).toBe(131_072n);
    await store.close();
  });

  it('refuses a blob transaction when the blob base fee is above the configured maximum', async () => {
    const { wallet, provider } = devnet();
    const blob = wallet(5);
    const store = new MemoryStore();
    const sender = senderOf({ plain: [], blob: [blob] }, store.nonces, new InMemorySentTransactionJournal(), {
      maxFeePerBlobGas: 0n,
    });
    const baseFee = BigInt(await provider.send('eth_blobBaseFee', []));
    const nonceBefore = await provider.getTransactionCount(blob.address, 'pending');
    const failure = await sender
      .send({ to: blob.address, blobs: [blobSidecarOf(toUtf8Bytes('too dear'))] })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(BlobFeeTooHighError);
    expect(failure).toMatchObject({ requiredFeePerBlobGas: baseFee, maxFeePerBlobGas: 0n });
    expect(await provider.getTransactionCount(blob.address, 'pending')).toBe(nonceBefore);
    await store.close();
  });

  it('replaces a dropped transaction with higher fees and returns the one that was mined', async () => {
    const { wallet, provider, rpc } = devnet();
    const account = wallet(6);
    const journal = new InMemorySentTransactionJournal();
    const store = new MemoryStore();
    const sender = senderOf({ plain: [account], blob: [] }, store.nonces, journal, {
      replaceAfterMs: 600_000,
    });
    const nonce = await provider.getTransactionCount(account.address, 'latest');
    await rpc('evm_setAutomine', [false]);
    try {
      const sending = sender.send(depositCall(7n));
      const [original] = await waitFor(
        async () => {
          const records = await journal.atNonce(account.address, nonce);
          return records.length === 1 && (await provider.getTransaction(records[0]!.hash))
            ? records
            : undefined;
        },
        { what: 'the first broadcast' },
      );
      await rpc('anvil_dropTransaction', [original!.hash]);
      const replacement = await waitFor(async () => (await journal.atNonce(account.address, nonce))[1], {
        what: 'a replacement',
      });
      await rpc('evm_mine');
      const mined = await sending;

      expect(mined.nonce).toBe(nonce);
      expect(mined.receipt.hash).toBe(replacement.hash);
      expect(mined.replacedHashes).toEqual([original!.hash]);
      expect(replacement.replaces).toBe(original!.hash);
      expect(replacement.maxPriorityFeePerGas * 100n).toBeGreaterThanOrEqual(
        original!.maxPriorityFeePerGas * 110n,
      );
      expect(replacement.maxFeePerGas * 100n).toBeGreaterThanOrEqual(original!.maxFeePerGas * 110n);
    } finally {
      await rpc('evm_setAutomine', [true]);
      await store.close();
    }
  });

  it('fills nonces the allocator handed out but nobody sent, so a transaction above them is mined', async () => {
    const { wallet, provider } = devnet();
    const account = wallet(7);
    const journal = new InMemorySentTransactionJournal();
    const store = new MemoryStore();
    const sender = senderOf({ plain: [account], blob: [] }, store.nonces, journal, { gapGraceMs: 100 });
    const chainNonce = await provider.getTransactionCount(account.address, 'latest');
    // As if a replica allocated two nonces and died before signing them.
    await store.nonces.reset(account.address, chainNonce + 2);

    const mined = await sender.send(depositCall(3n));

    expect(mined.nonce).toBe(chainNonce + 2);
    expect(mined.receipt.status).toBe(1);
    for (const nonce of [chainNonce, chainNonce + 1]) {
      const [filler] = await journal.atNonce(account.address, nonce);
      expect(filler).toMatchObject({ purpose: 'filler', to: account.address });
      const receipt = await provider.getTransactionReceipt(filler!.hash);
      expect(receipt?.status).toBe(1);
    }
    expect(await provider.getTransactionCount(account.address, 'latest')).toBe(chainNonce + 3);
    await store.close();
  });

  it('catches the allocator up when the chain moved past it', async () => {
    const { wallet } = devnet();
    const account = wallet(8);
    const store = new MemoryStore();
    const sender = senderOf(
      { plain: [account], blob: [] },
      store.nonces,
      new InMemorySentTransactionJournal(),
    );
    const first = await sender.send(depositCall(1n));
    // The account is used outside the allocator.
    await (await account.sendTransaction({ to: account.address, value: 0n })).wait();
    await (await account.sendTransaction({ to: account.address, value: 0n })).wait();

    const second = await sender.send(depositCall(1n));
    expect(second.nonce).toBe(first.nonce + 3);
    expect(await store.nonces.peek(account.address)).toBe(first.nonce + 4);
    await store.close();
  });
});
