import {
  BlobNotFoundError,
  decodeBlob,
  openPrompt,
  type BlobSource,
  type Prompt,
  type PromptPlace,
  type Session,
  type SessionKeyPair,
} from '@svc/chain';
import { modelIdOf } from '@svc/contracts';
import { setTimeout as sleep } from 'node:timers/promises';
import { BlobCommitments } from './blob-commitments.js';
import { JobRefusedError } from './job-refusal.js';

export interface PromptReaderOptions {
  readonly blobSource: BlobSource;
  readonly chainId: bigint;
  readonly jobRegistry: string;
  /** Models this worker can run. */
  readonly models: readonly string[];
  /** Tries for a blob the source does not hold yet (a beacon node lags the execution block). */
  readonly blobFetchAttempts?: number;
  readonly blobRetryDelayMs?: number;
  /** The blobs checked against their commitments (a test counts the computations). */
  readonly blobCommitments?: BlobCommitments;
}

/**
 * From a job on chain to the conversation to run: fetch the prompt blob, decode it, decrypt it with
 * the session's key, and check it asks for the session's model. Every way this can fail is a
 * {@link JobRefusedError}, never a crash: blobs are public input anyone can shape.
 */
export class PromptReader {
  readonly #options: PromptReaderOptions;
  readonly #blobs: BlobCommitments;

  constructor(options: PromptReaderOptions) {
    this.#options = options;
    this.#blobs = options.blobCommitments ?? new BlobCommitments();
  }

  /**
   * Whether `blob` is the one `commitment` commits to (a pending job's sidecar), each blob computed once;
   * a blob that matches is remembered, so reading a job of it from the chain later fetches nothing.
   */
  commitsTo(blob: Uint8Array, commitment: Uint8Array): Promise<boolean> {
    return this.#blobs.commitsTo(blob, commitment);
  }

  /** The prompt at `place` (from the job's event on chain) of a job of session `sessionId`. */
  async read(
    place: PromptPlace,
    sessionId: bigint,
    session: Session,
    keyPair: SessionKeyPair,
  ): Promise<Prompt> {
    const blob = await this.#fetch(place.promptBlobHash, place.blockNumber);
    return this.open(blob, place.promptIndex, sessionId, session, keyPair);
  }

  /**
   * From a blob already in hand (a pending job's sidecar) to the conversation, its prompt being payload
   * `promptIndex` of the blob; refuses as {@link read}.
   */
  open(
    blob: Uint8Array,
    promptIndex: number,
    sessionId: bigint,
    session: Session,
    keyPair: SessionKeyPair,
  ): Prompt {
    let wire: Uint8Array;
    try {
      wire = decodeBlob(blob, promptIndex);
    } catch (error) {
      throw new JobRefusedError('malformed_blob', 'the prompt blob is not a framed payload', {
        cause: error,
      });
    }
    let prompt: Prompt;
    try {
      prompt = openPrompt(wire, keyPair, {
        chainId: this.#options.chainId,
        jobRegistry: this.#options.jobRegistry,
        sessionId,
      });
    } catch (error) {
      throw new JobRefusedError('undecryptable_prompt', 'the prompt does not open with the session key', {
        cause: error,
      });
    }
    if (
      !this.#options.models.includes(prompt.model) ||
      modelIdOf(prompt.model) !== session.modelId.toLowerCase()
    ) {
      throw new JobRefusedError('wrong_model', "the prompt asks for a model that is not its session's");
    }
    return prompt;
  }

  #fetch(versionedHash: string, blockNumber: number): Promise<Uint8Array> {
    return this.#blobs.blobOf(versionedHash, async () => {
      const attempts = this.#options.blobFetchAttempts ?? 3;
      for (let attempt = 1; ; attempt += 1) {
        try {
          return await this.#options.blobSource.fetchBlob(versionedHash, { blockNumber });
        } catch (error) {
          if (attempt >= attempts) {
            throw new JobRefusedError(
              'blob_unavailable',
              error instanceof BlobNotFoundError ? 'the prompt blob was not found' : 'the blob source failed',
              { cause: error },
            );
          }
          await sleep(this.#options.blobRetryDelayMs ?? 500);
        }
      }
    });
  }
}
