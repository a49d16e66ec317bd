import { createHash } from 'node:crypto';
import { commitsTo, versionedHash } from '@svc/chain';

/** Blobs remembered: more than the batches a worker is offered jobs from at once (4 MiB at most). */
const REMEMBERED = 32;

/**
 * Whether a blob is the one a KZG commitment commits to, each blob computed once: the jobs of one batch
 * share a blob (docs/protocol.md, Batches), and a worker offered several of them recomputes the commitment
 * (15 to 80 ms of a KZG thread) only for the first. A blob is remembered by its bytes' SHA-256 (about
 * 0.3 ms), so another blob offered under the same commitment is computed afresh. A blob found to match is
 * also kept by its versioned hash, so a job of it that is read from the chain later (one whose offer was
 * declined, or announced only once mined) needs neither a fetch nor another commitment; so is a blob
 * fetched for such a job, so its batch's other jobs do not fetch and check it again.
 */
export class BlobCommitments {
  readonly #checked = new Map<string, Promise<boolean>>();
  readonly #verified = new Map<string, Uint8Array>();
  readonly #fetching = new Map<string, Promise<Uint8Array>>();

  constructor(private readonly compute: typeof commitsTo = commitsTo) {}

  commitsTo(blob: Uint8Array, commitment: Uint8Array): Promise<boolean> {
    const key = createHash('sha256').update(blob).update(commitment).digest('hex');
    let checked = this.#checked.get(key);
    if (checked) {
      this.#checked.delete(key);
    } else {
      checked = this.compute(blob, commitment);
      checked.then(
        (matches) => {
          if (matches) remember(this.#verified, versionedHash(commitment), blob);
        },
        () => this.#checked.delete(key), // a failed computation is not remembered
      );
    }
    remember(this.#checked, key, checked);
    return checked;
  }

  /** A blob found to match its commitment lately, by the commitment's versioned hash. */
  verified(blobVersionedHash: string): Uint8Array | undefined {
    return this.#verified.get(blobVersionedHash.toLowerCase());
  }

  /**
   * The blob under `blobVersionedHash`: one found to match lately, else what `fetch` returns (a blob source
   * checks a blob against its versioned hash, a KZG commitment each time), one fetch at a time per blob and
   * its result remembered. The jobs of a batch the chain announces before their offers arrive (a devnet
   * that mines at once, a busy replica) share one fetch.
   */
  blobOf(blobVersionedHash: string, fetch: () => Promise<Uint8Array>): Promise<Uint8Array> {
    const key = blobVersionedHash.toLowerCase();
    const known = this.#verified.get(key);
    if (known) return Promise.resolve(known);
    let fetching = this.#fetching.get(key);
    if (!fetching) {
      fetching = fetch()
        .then((blob) => {
          remember(this.#verified, key, blob);
          return blob;
        })
        .finally(() => this.#fetching.delete(key));
      this.#fetching.set(key, fetching);
    }
    return fetching;
  }
}

/** Sets `key` as the newest entry, dropping the oldest beyond REMEMBERED. */
function remember<T>(entries: Map<string, T>, key: string, value: T): void {
  entries.delete(key);
  entries.set(key, value);
  while (entries.size > REMEMBERED) entries.delete(entries.keys().next().value!);
}
