import type { JsonRpcProvider } from 'ethers';
import { BLOB_BYTES } from '../blob/codec.js';
import { sidecarOfBlob, type BlobSidecar } from '../blob/kzg.js';
import { blobFeeCap, currentExecutionFees, replacementFees, type TransactionFees } from './fees.js';
import type { SendingAccount, TransactionLane } from './operator-lanes.js';
import type { SentTransactionJournal } from './sent-transaction-journal.js';
import { broadcast, signRecordBroadcast } from './signed-broadcast.js';

const TRANSFER_GAS = 21_000n;

export interface NonceGapRepairOptions {
  readonly provider: JsonRpcProvider;
  readonly journal: SentTransactionJournal;
  readonly maxFeePerBlobGas: bigint;
  readonly gapGraceMs: number;
  readonly chainId: () => Promise<bigint>;
}

/**
 * Closes nonce gaps below a pending transaction, which the node would otherwise hold forever: a
 * nonce somebody signed is rebroadcast from the journal (its sender may be gone); a nonce nobody
 * signed (a replica died between allocating and signing, or a broadcast failed) gets a 0-value
 * self-transfer. A blob account's filler carries the all-zero blob, because a node refuses an account
 * with blob and plain transactions pending together (the codec makes no such blob: it carries no payload).
 */
export class NonceGapRepair {
  readonly #options: NonceGapRepairOptions;
  /** `account:nonce` → when this process first saw the nonce missing. */
  readonly #missingSince = new Map<string, number>();
  #zeroBlob: BlobSidecar | undefined;

  constructor(options: NonceGapRepairOptions) {
    this.#options = options;
  }

  /** Repairs every nonce in [fromNonce, belowNonce) that has been missing for the grace period. */
  async repair(
    account: SendingAccount,
    lane: TransactionLane,
    fromNonce: number,
    belowNonce: number,
  ): Promise<void> {
    const now = Date.now();
    for (const key of this.#missingSince.keys()) {
      const [address, nonce] = key.split(':');
      if (address === account.address.toLowerCase() && Number(nonce) < fromNonce)
        this.#missingSince.delete(key);
    }
    for (let nonce = fromNonce; nonce < belowNonce; nonce++) {
      const key = `${account.address.toLowerCase()}:${nonce}`;
      const since = this.#missingSince.get(key);
      if (since === undefined) {
        this.#missingSince.set(key, now);
        continue;
      }
      if (now - since < this.#options.gapGraceMs) continue;
      // Give the nonce another full grace period before acting on it again.
      this.#missingSince.set(key, now);
      await this.#repairNonce(account, lane, nonce);
    }
  }

  async #repairNonce(account: SendingAccount, lane: TransactionLane, nonce: number): Promise<void> {
    const { provider, journal } = this.#options;
    const records = await journal.atNonce(account.address, nonce);
    for (const record of [...records].reverse()) {
      if ((await provider.getTransaction(record.hash)) !== null) return; // the node holds it: just slow
    }
    const newest = records.at(-1);
    if (newest) {
      // Someone signed this nonce and the node forgot it: send it again rather than overwrite it.
      await broadcast(provider, newest.rawTransaction);
      return;
    }
    await this.#fill(account, lane, nonce);
  }

  async #fill(account: SendingAccount, lane: TransactionLane, nonce: number): Promise<void> {
    const { provider, journal, maxFeePerBlobGas } = this.#options;
    const market = await currentExecutionFees(provider);
    let fees: TransactionFees = {
      ...market,
      maxFeePerBlobGas: lane === 'blob' ? await blobFeeCap(provider, maxFeePerBlobGas) : null,
    };
    const blobs = lane === 'blob' ? [(this.#zeroBlob ??= sidecarOfBlob(new Uint8Array(BLOB_BYTES)))] : [];
    const body = { to: account.address, data: '0x', value: 0n, gasLimit: TRANSFER_GAS, blobs };
    const context = { provider, journal, chainId: await this.#options.chainId() };
    let replaces: string | null = null;
    // An unknown transaction may sit at this nonce in the node's pool; outbid it once.
    for (let attempt = 0; attempt < 2; attempt++) {
      const sent = await signRecordBroadcast(context, account, nonce, body, fees, {
        lane,
        purpose: 'filler',
        replaces,
      });
      if (sent.outcome !== 'underpriced') return;
      replaces = sent.record.hash;
      fees = replacementFees(fees, market, maxFeePerBlobGas);
    }
  }
}
