import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Transaction, Wallet, hexlify } from 'ethers';
import { MemoryStore, type Store } from '@svc/platform';
import { createTestStore } from '@svc/platform/testing';
import { useDevnet } from '@svc/testkit';
import {
  OperatorLanes,
  SENT_TRANSACTION_RECORD_VERSION,
  StoreSentTransactionJournal,
  TransactionSender,
  decodeSentTransactionRecord,
  encodeSentTransactionRecord,
  type SentTransactionRecord,
  type StoreSentTransactionJournalOptions,
} from '../../src/index.js';

interface JournalFixture {
  /** Two stores over one shared state, as two replicas see it (the same object for the memory store). */
  readonly replicas: readonly [Store, Store];
  /** A store opened afresh over the same state, as a restarted replica opens it. */
  reopen(): Store;
  dispose(): Promise<void>;
}

const WEI_ABOVE_2_POW_64 = 2n ** 200n + 12_345n;

function randomAccount(): string {
  return Wallet.createRandom().address;
}

function randomHash(): string {
  return hexlify(randomBytes(32));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function plainRecord(account: string, nonce: number, overrides: Partial<SentTransactionRecord> = {}) {
  return {
    account,
    nonce,
    hash: randomHash(),
    rawTransaction: `0x02${randomBytes(120).toString('hex')}`,
    lane: 'plain',
    purpose: 'call',
    to: randomAccount(),
    maxFeePerGas: 30_000_000_000n,
    maxPriorityFeePerGas: 1_500_000_000n,
    maxFeePerBlobGas: null,
    replaces: null,
    signedAtMs: Date.now(),
    ...overrides,
  } satisfies SentTransactionRecord;
}

function blobRecord(account: string, nonce: number, overrides: Partial<SentTransactionRecord> = {}) {
  return plainRecord(account, nonce, {
    // A blob transaction in network form carries its blob: well over 128 KiB.
    rawTransaction: `0x03${randomBytes(132_000).toString('hex')}`,
    lane: 'blob',
    maxFeePerGas: WEI_ABOVE_2_POW_64,
    maxPriorityFeePerGas: 2n ** 64n,
    maxFeePerBlobGas: 2n ** 53n + 1n,
    ...overrides,
  });
}

/** The journal's behaviour, the same on every store it runs over. */
function describeJournalContract(name: string, setup: () => Promise<JournalFixture>): void {
  describe(`StoreSentTransactionJournal over ${name}`, () => {
    let fixture: JournalFixture | undefined;
    const use = (): JournalFixture => {
      if (fixture === undefined) throw new Error('the journal fixture is not set up');
      return fixture;
    };
    const journalsOf = (options?: StoreSentTransactionJournalOptions) =>
      use().replicas.map((store) => new StoreSentTransactionJournal(store, options)) as [
        StoreSentTransactionJournal,
        StoreSentTransactionJournal,
      ];

    beforeAll(async () => {
      fixture = await setup();
    });
    afterAll(async () => {
      await fixture?.dispose();
    });

    it('returns a full record exactly as recorded: blob lane, big wei amounts, a replaced hash', async () => {
      const [writer, reader] = journalsOf();
      const account = randomAccount();
      const original = blobRecord(account, 7);
      const replacement = blobRecord(account, 7, {
        maxFeePerBlobGas: 0n,
        maxPriorityFeePerGas: 0n,
        replaces: original.hash,
        purpose: 'filler',
        signedAtMs: original.signedAtMs + 1,
      });
      await writer.record(original);
      await writer.record(replacement);

      const records = await reader.atNonce(account, 7);
      expect(records).toEqual([original, replacement]);
      expect(records[0]!.maxFeePerGas).toBe(WEI_ABOVE_2_POW_64);
      expect(records[1]!.maxFeePerBlobGas).toBe(0n);
      expect(records[1]!.replaces).toBe(original.hash);
    });

    it('keeps a plain record’s null blob fee and null replaces as nulls', async () => {
      const [writer, reader] = journalsOf();
      const account = randomAccount();
      const record = plainRecord(account, 0);
      await writer.record(record);
      const [read] = await reader.atNonce(account, 0);
      expect(read).toEqual(record);
      expect(read!.maxFeePerBlobGas).toBeNull();
      expect(read!.replaces).toBeNull();
    });

    it('returns every record of a nonce oldest first, whichever replica wrote it', async () => {
      const [first, second] = journalsOf();
      const account = randomAccount();
      const attempts: SentTransactionRecord[] = [];
      for (let i = 0; i < 5; i++) {
        const attempt = plainRecord(account, 3, { replaces: attempts.at(-1)?.hash ?? null });
        attempts.push(attempt);
        await (i % 2 === 0 ? first : second).record(attempt);
      }
      expect(await first.atNonce(account, 3)).toEqual(attempts);
      expect(await second.atNonce(account, 3)).toEqual(attempts);
    });

    it('pages through a nonce with more records than one read returns', async () => {
      const [journal] = journalsOf();
      const account = randomAccount();
      const attempts = Array.from({ length: 130 }, () => plainRecord(account, 1));
      for (const attempt of attempts) await journal.record(attempt);
      expect((await journal.atNonce(account, 1)).map((r) => r.hash)).toEqual(attempts.map((r) => r.hash));
    });

    it('keeps a record written twice once, the first copy, also across replicas and concurrently', async () => {
      const [first, second] = journalsOf();
      const account = randomAccount();
      const record = plainRecord(account, 4);
      await first.record(record);
      await second.record(record);
      // A retry re-records the same transaction (same hash), perhaps with a later timestamp.
      await first.record({ ...record, signedAtMs: record.signedAtMs + 5_000 });
      expect(await first.atNonce(account, 4)).toEqual([record]);

      const racing = plainRecord(account, 5);
      await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? first : second).record(racing)));
      expect(await second.atNonce(account, 5)).toEqual([racing]);
    });

    it('finds an account’s records however the account is spelled, and keeps the spelling recorded', async () => {
      const [writer, reader] = journalsOf();
      const account = randomAccount(); // EIP-55 checksummed
      const record = plainRecord(account, 9);
      await writer.record(record);
      const upper = `0x${account.slice(2).toUpperCase()}`;
      for (const spelling of [account, account.toLowerCase(), upper]) {
        expect(await reader.atNonce(spelling, 9)).toEqual([record]);
      }
      const another = plainRecord(account.toLowerCase(), 9);
      await writer.record(another);
      expect((await reader.atNonce(upper, 9)).map((r) => r.account)).toEqual([
        account,
        account.toLowerCase(),
      ]);
    });

    it('shows a restarted replica, on a store opened afresh, every record written before', async () => {
      const account = randomAccount();
      const before = new StoreSentTransactionJournal(use().replicas[0]);
      const signed = [blobRecord(account, 11), blobRecord(account, 12), plainRecord(account, 12)];
      for (const record of signed) await before.record(record);

      const restarted = new StoreSentTransactionJournal(use().reopen());
      expect(await restarted.atNonce(account, 11)).toEqual([signed[0]]);
      expect(await restarted.atNonce(account, 12)).toEqual([signed[1], signed[2]]);
    });

    it('does not mix in records of other nonces or other accounts', async () => {
      const [writer, reader] = journalsOf();
      const [alice, bob] = [randomAccount(), randomAccount()];
      const aliceAt2 = plainRecord(alice, 2);
      const aliceAt3 = plainRecord(alice, 3);
      const bobAt2 = plainRecord(bob, 2);
      const aliceAt20 = plainRecord(alice, 20);
      for (const record of [aliceAt2, bobAt2, aliceAt3, aliceAt20]) await writer.record(record);
      expect(await reader.atNonce(alice, 2)).toEqual([aliceAt2]);
      expect(await reader.atNonce(alice, 3)).toEqual([aliceAt3]);
      expect(await reader.atNonce(alice, 20)).toEqual([aliceAt20]);
      expect(await reader.atNonce(bob, 2)).toEqual([bobAt2]);
      expect(await reader.atNonce(bob, 3)).toEqual([]);
      expect(await reader.atNonce(randomAccount(), 2)).toEqual([]);
    });

    it('forgets the nonces just below the floor it is given and keeps the rest', async () => {
      const [writer, reader] = journalsOf();
      const [account, other] = [randomAccount(), randomAccount()];
      for (let nonce = 0; nonce < 6; nonce++) await writer.record(plainRecord(account, nonce));
      await writer.record(plainRecord(other, 1));
      await writer.forgetBelow(account.toLowerCase(), 0); // nothing below 0
      await writer.forgetBelow(account, -1_000);
      expect(await reader.atNonce(account, 0)).toHaveLength(1);

      await writer.forgetBelow(account, 4);
      await sleep(20); // the streams are expired to 1 ms from now
      for (const nonce of [0, 1, 2, 3]) expect(await reader.atNonce(account, nonce)).toEqual([]);
      expect(await reader.atNonce(account, 4)).toHaveLength(1);
      expect(await reader.atNonce(account, 5)).toHaveLength(1);
      expect(await reader.atNonce(other, 1)).toHaveLength(1);
    });

    it('drops the records of a nonce at their retention after the newest one', async () => {
      const [writer, reader] = journalsOf({ retentionMs: 300 });
      const account = randomAccount();
      await writer.record(plainRecord(account, 0));
      await sleep(200);
      await writer.record(plainRecord(account, 0)); // refreshes the retention of the whole nonce
      await sleep(200);
      expect(await reader.atNonce(account, 0)).toHaveLength(2);
      await sleep(250);
      expect(await reader.atNonce(account, 0)).toEqual([]);
    });

    it('refuses a record it could not read back', async () => {
      const [journal] = journalsOf();
      const account = randomAccount();
      await expect(journal.record(plainRecord(account, -1))).rejects.toThrow(RangeError);
      await expect(journal.record(plainRecord(account, 1.5))).rejects.toThrow(RangeError);
      await expect(journal.record(plainRecord(account, 0, { maxFeePerGas: -1n }))).rejects.toThrow(
        RangeError,
      );
      await expect(journal.record(plainRecord('', 0))).rejects.toThrow(RangeError);
      await expect(journal.atNonce(account, -1)).rejects.toThrow(RangeError);
      expect(await journal.atNonce(account, 0)).toEqual([]);
    });
  });
}

describeJournalContract('a MemoryStore', async () => {
  const store = new MemoryStore();
  return {
    // One process shares one MemoryStore: both replicas, and the restarted journal, use the instance.
    replicas: [store, store],
    reopen: () => store,
    dispose: () => store.close(),
  };
});

describeJournalContract('a RedisStore', async () => {
  const redis = createTestStore('test:chain:sent-tx-journal');
  return {
    replicas: [redis.open(), redis.open()],
    reopen: () => redis.open(),
    dispose: () => redis.cleanup(),
  };
});

describe('the stored record format', () => {
  it('is versioned JSON with wei amounts as decimal strings', () => {
    const record = blobRecord(randomAccount(), 1, { rawTransaction: '0x03ab' });
    const json = JSON.parse(new TextDecoder().decode(encodeSentTransactionRecord(record)));
    expect(json).toEqual({
      v: SENT_TRANSACTION_RECORD_VERSION,
      account: record.account,
      nonce: 1,
      hash: record.hash,
      rawTransaction: '0x03ab',
      lane: 'blob',
      purpose: 'call',
      to: record.to,
      maxFeePerGas: WEI_ABOVE_2_POW_64.toString(),
      maxPriorityFeePerGas: (2n ** 64n).toString(),
      maxFeePerBlobGas: (2n ** 53n + 1n).toString(),
      replaces: null,
      signedAtMs: record.signedAtMs,
    });
    expect(decodeSentTransactionRecord(encodeSentTransactionRecord(record))).toEqual(record);
  });

  it('refuses another version or a malformed record rather than guess', () => {
    const stored = JSON.parse(new TextDecoder().decode(encodeSentTransactionRecord(plainRecord('0xa', 0))));
    const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
    expect(() => decodeSentTransactionRecord(encode({ ...stored, v: 2 }))).toThrow(/unknown version 2/);
    expect(() => decodeSentTransactionRecord(encode({ ...stored, maxFeePerGas: 1 }))).toThrow(/maxFeePerGas/);
    expect(() => decodeSentTransactionRecord(encode({ ...stored, maxFeePerGas: '0x10' }))).toThrow(
      /maxFeePerGas/,
    );
    expect(() => decodeSentTransactionRecord(encode({ ...stored, lane: 'fast' }))).toThrow(/lane/);
    expect(() => decodeSentTransactionRecord(encode({ ...stored, nonce: -1 }))).toThrow(/nonce/);
    expect(() => decodeSentTransactionRecord(encode([stored]))).toThrow(/object/);
  });

  it('refuses a retention that is not a positive whole number of ms', () => {
    const store = new MemoryStore();
    expect(() => new StoreSentTransactionJournal(store, { retentionMs: 0 })).toThrow(RangeError);
    expect(() => new StoreSentTransactionJournal(store, { retentionMs: 1.5 })).toThrow(RangeError);
    void store.close();
  });
});

describe('TransactionSender with a StoreSentTransactionJournal on a RedisStore', () => {
  const devnet = useDevnet();
  const redis = createTestStore('test:chain:sent-tx-journal-sender');
  afterAll(() => redis.cleanup());

  it('rebroadcasts what a replica signed and recorded before it died, instead of reusing its nonce', async () => {
    const { provider, wallet } = devnet();
    const account = wallet(1);
    const payee = wallet(2).address;
    const chainNonce = await provider.getTransactionCount(account.address, 'latest');

    // The replica that dies: it allocates a nonce, signs and records a transfer, and is gone before
    // the broadcast.
    const dying = redis.open();
    const nonce = await dying.nonces.allocate(account.address, chainNonce);
    expect(nonce).toBe(chainNonce);
    const fees = await provider.getFeeData();
    const rawTransaction = await account.signTransaction({
      type: 2,
      chainId: (await provider.getNetwork()).chainId,
      nonce,
      to: payee,
      value: 1n,
      gasLimit: 21_000n,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
    const orphan = plainRecord(account.address, nonce, {
      hash: Transaction.from(rawTransaction).hash!,
      rawTransaction,
      to: payee,
      maxFeePerGas: fees.maxFeePerGas!,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas!,
    });
    await new StoreSentTransactionJournal(dying).record(orphan);
    await dying.close();

    // The replica after the restart: a new store connection and a new journal.
    const store = redis.open();
    const journal = new StoreSentTransactionJournal(store);
    const sender = new TransactionSender({
      provider,
      nonces: store.nonces,
      journal,
      lanes: new OperatorLanes({ plain: [account], blob: [] }),
      maxFeePerBlobGas: 10n ** 9n,
      pollIntervalMs: 25,
      gapGraceMs: 100,
    });
    const mined = await sender.send({ to: payee, value: 2n });

    expect(mined.nonce).toBe(chainNonce + 1);
    expect(mined.receipt.status).toBe(1);
    expect((await provider.getTransactionReceipt(orphan.hash))?.status).toBe(1);
    // The orphan was sent again, not overwritten by a filler, and both nonces hold what was signed.
    expect(await journal.atNonce(account.address, chainNonce)).toEqual([orphan]);
    expect((await journal.atNonce(account.address, chainNonce + 1)).map((r) => r.hash)).toEqual([
      mined.receipt.hash,
    ]);
    expect(await provider.getTransactionCount(account.address, 'latest')).toBe(chainNonce + 2);
  });
});
