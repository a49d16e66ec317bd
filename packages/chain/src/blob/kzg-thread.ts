import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { MalformedBlobError } from '../errors.js';
import { encodeBlob } from './codec.js';
import { versionedHash, type BlobSidecar } from './kzg.js';

/**
 * A blob whose commitment is known and whose proof is still being computed. A type-3 transaction's
 * signature covers only the blob's versioned hash, so it can be signed (and handed to its worker) on the
 * commitment alone; only its network form, with the sidecar, waits for the proof.
 */
export interface ProvingBlobSidecar extends Omit<BlobSidecar, 'proof'> {
  readonly proof: Promise<Uint8Array>;
}

/**
 * The thread's code, inline so the same module runs from source, under jest and from the bundled build
 * (a separate worker file would need its own entry in each). It loads c-kzg and the trusted setup itself:
 * the native setup is per instance of the addon, and each thread is one.
 */
const THREAD_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const ckzg = require(workerData.ckzgPath);
ckzg.loadTrustedSetup(0);
parentPort.on('message', ({ id, op, blob, commitment }) => {
  const started = performance.now();
  try {
    const result = op === 'commitment' ? ckzg.blobToKzgCommitment(blob) : ckzg.computeBlobKzgProof(blob, commitment);
    parentPort.postMessage({ id, result, ms: performance.now() - started });
  } catch (error) {
    parentPort.postMessage({ id, error: String(error && error.message ? error.message : error), ms: performance.now() - started });
  }
});
`;

export type KzgOperation = 'commitment' | 'proof';

/** What the threads computed since the process started, by operation. */
export type KzgWork = Readonly<
  Record<KzgOperation, { readonly operations: number; readonly seconds: number }>
>;

interface Reply {
  readonly id: number;
  readonly result?: Uint8Array;
  readonly error?: string;
  /** Time the thread spent on the operation: CPU-bound, so its CPU time unless the cores are oversubscribed. */
  readonly ms: number;
}

interface Waiting {
  readonly op: KzgOperation;
  resolve(bytes: Uint8Array): void;
  reject(error: Error): void;
}

/** One worker thread and the requests it holds. */
class KzgWorker {
  readonly #worker: Worker;
  readonly #waiting = new Map<number, Waiting>();
  readonly #onWork: (op: KzgOperation, ms: number) => void;
  #nextId = 0;
  #dead = false;

  constructor(ckzgPath: string, onWork: (op: KzgOperation, ms: number) => void) {
    this.#onWork = onWork;
    this.#worker = new Worker(THREAD_SOURCE, { eval: true, workerData: { ckzgPath } });
    this.#worker.unref();
    // An unref before the thread is online does not hold (Node): it is done again once it is.
    this.#worker.once('online', () => {
      if (this.#waiting.size === 0) this.#worker.unref();
    });
    this.#worker.on('message', (reply: Reply) => this.#settle(reply));
    // A thread that died (it never should) fails what it held; the pool starts another for what comes next.
    this.#worker.on('error', (error) => this.#fail(error));
    this.#worker.on('exit', (code) => this.#fail(new Error(`the KZG thread exited (code ${code})`)));
  }

  get load(): number {
    return this.#waiting.size;
  }

  get dead(): boolean {
    return this.#dead;
  }

  ask(op: KzgOperation, blob: Uint8Array, commitment?: Uint8Array): Promise<Uint8Array> {
    const id = this.#nextId++;
    return new Promise<Uint8Array>((resolve, reject) => {
      this.#waiting.set(id, { op, resolve, reject });
      // Only work in flight keeps the process alive, as a socket would.
      if (this.#waiting.size === 1) this.#worker.ref();
      this.#worker.postMessage({ id, op, blob, commitment });
    });
  }

  #settle({ id, result, error, ms }: Reply): void {
    const waiting = this.#waiting.get(id);
    if (!waiting) return;
    this.#waiting.delete(id);
    this.#onWork(waiting.op, ms);
    if (this.#waiting.size === 0) this.#worker.unref();
    if (result) waiting.resolve(new Uint8Array(result));
    else
      waiting.reject(
        new MalformedBlobError('not_canonical', 'c-kzg refused the blob or commitment', {
          cause: new Error(error),
        }),
      );
  }

  #fail(error: Error): void {
    this.#dead = true;
    for (const [id, waiting] of this.#waiting) {
      this.#waiting.delete(id);
      waiting.reject(error);
    }
  }
}

/**
 * KZG commitments and proofs off the event loop, on worker threads. Each costs from about 15 ms (a short
 * prompt's commitment) to about 90 ms (a proof) of CPU; on the calling thread that stalls every other
 * call, link frame and chain read of the process, and chain reads issued before it cannot even leave until
 * it is done. Up to two threads (one on a single core), each request to the least busy: a worker's
 * commitment check then runs beside a submission's proof instead of behind it (in `npm start` both are in
 * one process). Each thread loads its own trusted setup (about 2.5 s of CPU, once), so only a service's
 * `warmUp` starts two; a process that never warms up (a test, a script) starts one at its first blob.
 */
class KzgThreads {
  readonly #size = Math.min(2, availableParallelism());
  #workers: KzgWorker[] = [];
  readonly #work = { commitment: { operations: 0, seconds: 0 }, proof: { operations: 0, seconds: 0 } };

  /** The work done so far (what `svc_kzg_seconds_total` reports), a copy. */
  work(): KzgWork {
    return { commitment: { ...this.#work.commitment }, proof: { ...this.#work.proof } };
  }

  commitment(blob: Uint8Array): Promise<Uint8Array> {
    return this.#leastBusy().ask('commitment', blob);
  }

  proof(blob: Uint8Array, commitment: Uint8Array): Promise<Uint8Array> {
    return this.#leastBusy().ask('proof', blob, commitment);
  }

  /** Starts every thread now, so loading their trusted setups is not on a first call's path. */
  warmUp(): void {
    this.#workers = this.#workers.filter((worker) => !worker.dead);
    while (this.#workers.length < this.#size) this.#start();
  }

  #leastBusy(): KzgWorker {
    this.#workers = this.#workers.filter((worker) => !worker.dead);
    if (this.#workers.length === 0) return this.#start();
    return this.#workers.reduce((best, worker) => (worker.load < best.load ? worker : best));
  }

  #start(): KzgWorker {
    const worker = new KzgWorker(createRequire(import.meta.url).resolve('c-kzg'), (op, ms) => {
      this.#work[op].operations += 1;
      this.#work[op].seconds += ms / 1000;
    });
    this.#workers.push(worker);
    return worker;
  }
}

/** The process's KZG threads (one set per module instance; a jest registry gets its own). */
export const kzgThreads = new KzgThreads();

/**
 * Encodes `payloads` into one blob ({@link encodeBlob}) and computes its commitment off the event loop;
 * the proof goes on computing there while the caller signs and hands over the transaction.
 */
export async function provingBlobSidecarOf(...payloads: Uint8Array[]): Promise<ProvingBlobSidecar> {
  const data = encodeBlob(...payloads);
  const commitment = await kzgThreads.commitment(data);
  const proof = kzgThreads.proof(data, commitment);
  // Awaited where the sidecar is sent; a send refused before that never does.
  proof.catch(() => undefined);
  return { data, commitment, versionedHash: versionedHash(commitment), proof };
}

/** Whether `commitment` is the KZG commitment of `blob`, computed off the event loop. */
export async function commitsTo(blob: Uint8Array, commitment: Uint8Array): Promise<boolean> {
  try {
    return Buffer.from(await kzgThreads.commitment(blob)).equals(Buffer.from(commitment));
  } catch {
    return false;
  }
}
