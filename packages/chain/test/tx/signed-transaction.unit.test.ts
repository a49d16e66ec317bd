import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { Transaction, Wallet, type TransactionRequest } from 'ethers';
import { blobSidecarOf } from '../../src/index.js';
import { signTransaction } from '../../src/tx/signed-broadcast.js';
import type { SendingAccount } from '../../src/tx/operator-lanes.js';

const wallet = new Wallet('0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d');
/** The same key behind a signer that is not a local wallet (a remote signer): ethers' own path. */
const opaque: SendingAccount = Object.assign(Object.create(null) as object, {
  address: wallet.address,
  signTransaction: (request: TransactionRequest) => wallet.signTransaction(request),
}) as unknown as SendingAccount;

const request: TransactionRequest = {
  type: 3,
  chainId: 31337n,
  nonce: 7,
  to: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
  data: '0xdeadbeef',
  value: 0n,
  gasLimit: 210_000n,
  maxFeePerGas: 30_000_000_000n,
  maxPriorityFeePerGas: 1_000_000_000n,
  maxFeePerBlobGas: 2n,
};

describe('signTransaction', () => {
  it('signs a blob transaction without its sidecar to the same bytes and hash as ethers', async () => {
    const blobs = [blobSidecarOf(randomBytes(40_000)), blobSidecarOf(randomBytes(10))];
    const fast = await signTransaction(wallet, request, blobs);
    const reference = await signTransaction(opaque, request, blobs);
    expect(fast).toEqual(reference);
    const parsed = Transaction.from(fast.rawTransaction);
    expect(parsed.blobVersionedHashes).toEqual(blobs.map((blob) => blob.versionedHash));
    expect(parsed.from).toBe(wallet.address);
    expect(parsed.blobs?.map((blob) => blob.data)).toEqual(
      blobs.map((blob) => `0x${Buffer.from(blob.data).toString('hex')}`),
    );
    // The sidecar-free form (what a worker is handed before inclusion) parses to the same signed transaction.
    const withoutSidecar = Transaction.from(fast.signedTransaction);
    expect(withoutSidecar.blobs).toBeNull();
    expect(withoutSidecar.hash).toBe(fast.hash);
    expect(withoutSidecar.from).toBe(wallet.address);
    expect(fast.signedTransaction.length).toBeLessThan(1_000);
  });

  it('signs a plain transaction as ethers does', async () => {
    const plain = { ...request, type: 2, maxFeePerBlobGas: undefined };
    const signed = await signTransaction(wallet, plain, []);
    expect(signed.rawTransaction).toBe(await wallet.signTransaction(plain));
    expect(signed.hash).toBe(Transaction.from(signed.rawTransaction).hash);
  });
});
