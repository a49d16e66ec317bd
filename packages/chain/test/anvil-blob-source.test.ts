import { describe, expect, it } from '@jest/globals';
import { hexlify, toUtf8Bytes } from 'ethers';
import { MemoryStore } from '@svc/platform';
import {
  AnvilBlobSource,
  BlobNotFoundError,
  InMemorySentTransactionJournal,
  OperatorLanes,
  TransactionSender,
  blobSidecarOf,
  decodeBlob,
} from '../src/index.js';
import { useDevnet } from '@svc/testkit';

const devnet = useDevnet({ warmBlobs: true });

describe('AnvilBlobSource', () => {
  it('returns the exact blob of a mined blob transaction and refuses a hash that is not in the block', async () => {
    const { wallet, provider, anvil } = devnet();
    const account = wallet(1);
    const store = new MemoryStore();
    const sender = new TransactionSender({
      provider,
      nonces: store.nonces,
      journal: new InMemorySentTransactionJournal(),
      lanes: new OperatorLanes({ blob: [account], plain: [] }),
      maxFeePerBlobGas: 10n ** 9n,
      pollIntervalMs: 25,
    });
    const first = blobSidecarOf(toUtf8Bytes('first prompt of the block'));
    const second = blobSidecarOf(toUtf8Bytes('second prompt of the block'));
    const mined = await sender.send({ to: account.address, blobs: [first, second] });
    await store.close();
    const source = new AnvilBlobSource({ rpcUrl: anvil.rpcUrl });
    const blockNumber = mined.receipt.blockNumber;

    const fetched = await source.fetchBlob(second.versionedHash, { blockNumber });
    expect(hexlify(fetched)).toBe(hexlify(second.data));
    expect(new TextDecoder().decode(decodeBlob(fetched))).toBe('second prompt of the block');
    expect(hexlify(await source.fetchBlob(first.versionedHash, { blockNumber }))).toBe(hexlify(first.data));

    const elsewhere = blobSidecarOf(toUtf8Bytes('never sent'));
    await expect(source.fetchBlob(elsewhere.versionedHash, { blockNumber })).rejects.toBeInstanceOf(
      BlobNotFoundError,
    );
    await expect(
      source.fetchBlob(first.versionedHash, { blockNumber: blockNumber - 1 }),
    ).rejects.toBeInstanceOf(BlobNotFoundError);
    await expect(
      source.fetchBlob(first.versionedHash, { blockNumber: blockNumber + 1000 }),
    ).rejects.toBeInstanceOf(BlobNotFoundError);
    await expect(source.fetchBlob('0x02' + '00'.repeat(31), { blockNumber })).rejects.toThrow(RangeError);
  });
});
