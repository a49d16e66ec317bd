import { describe, expect, it } from '@jest/globals';
import { randomBytes } from 'node:crypto';
import { Transaction, Wallet, type TransactionRequest } from 'ethers';
import { Registry } from 'prom-client';
import { blobSidecarOf, MalformedBlobError } from '../../src/index.js';
import { countKzgWork } from '../../src/blob/kzg-metrics.js';
import { commitsTo, kzgThreads, provingBlobSidecarOf } from '../../src/blob/kzg-thread.js';
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
    expect({ ...fast, rawTransaction: await fast.rawTransaction }).toEqual({
      ...reference,
      rawTransaction: await reference.rawTransaction,
    });
    const parsed = Transaction.from(await fast.rawTransaction);
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
    expect(await signed.rawTransaction).toBe(await wallet.signTransaction(plain));
    expect(signed.hash).toBe(Transaction.from(await signed.rawTransaction).hash);
  });

  it('signs a blob whose proof is still computing, and gives its network form once the proof is there', async () => {
    const payload = randomBytes(3_000);
    const proving = await provingBlobSidecarOf(payload);
    const complete = blobSidecarOf(payload);
    // The commitment came from the KZG thread: the same as the calling thread's.
    expect(Buffer.from(proving.commitment).equals(Buffer.from(complete.commitment))).toBe(true);
    let proved!: (proof: Uint8Array) => void;
    const late = { ...proving, proof: new Promise<Uint8Array>((resolve) => (proved = resolve)) };
    const signed = await signTransaction(wallet, request, [late]);
    const reference = await signTransaction(opaque, request, [complete]);
    // Signed and hashed before the proof exists.
    expect(signed.hash).toBe(reference.hash);
    expect(signed.signedTransaction).toBe(reference.signedTransaction);
    let networkForm: string | undefined;
    void signed.rawTransaction.then((raw) => (networkForm = raw));
    await new Promise((resolve) => setImmediate(resolve));
    expect(networkForm).toBeUndefined();
    proved(await proving.proof);
    expect(await signed.rawTransaction).toBe(await reference.rawTransaction);
  });
});

describe('the KZG thread', () => {
  it('refuses a blob that is not canonical, and says whether a commitment is a blob’s', async () => {
    const { data, commitment } = blobSidecarOf(randomBytes(100));
    expect(await commitsTo(data, commitment)).toBe(true);
    const other = blobSidecarOf(randomBytes(100));
    expect(await commitsTo(data, other.commitment)).toBe(false);
    expect(await commitsTo(data.subarray(1), commitment)).toBe(false);
    const notCanonical = new Uint8Array(data.length).fill(0xff);
    await expect(kzgThreads.commitment(notCanonical)).rejects.toThrow(MalformedBlobError);
    expect(await commitsTo(notCanonical, commitment)).toBe(false);
  });

  it('counts its work by operation, read at each scrape', async () => {
    const registry = new Registry();
    countKzgWork(registry);
    countKzgWork(registry); // once per registry
    const reading = async () => {
      const metrics = await registry.getMetricsAsJSON();
      const value = (name: string, operation: string) =>
        metrics.find((metric) => metric.name === name)?.values.find((v) => v.labels.operation === operation)
          ?.value ?? Number.NaN;
      return {
        commitments: value('svc_kzg_operations_total', 'commitment'),
        proofs: value('svc_kzg_operations_total', 'proof'),
        proofSeconds: value('svc_kzg_seconds_total', 'proof'),
      };
    };
    const before = await reading();
    const proving = await provingBlobSidecarOf(randomBytes(1_000));
    await proving.proof;
    const after = await reading();
    expect(after.commitments).toBe(before.commitments + 1);
    expect(after.proofs).toBe(before.proofs + 1);
    // A proof takes tens of milliseconds of the thread's time.
    expect(after.proofSeconds - before.proofSeconds).toBeGreaterThan(0.001);
    expect(after.proofSeconds - before.proofSeconds).toBeLessThan(5);
  });
});
