import { getBytes, parseEther, Transaction, type Wallet } from 'ethers';
import {
  ChainClient,
  JobState,
  blobSidecarOf,
  type BlobSidecar,
  SessionState,
  encodeBlob,
  encodePromptPlaintext,
  encryptPrompt,
  generateReplyKey,
  type Job,
  type PromptMessage,
} from '@svc/chain';
import { connectJobRegistry, modelIdOf, type Deployment } from '@svc/contracts';
import { sendWithBlobs } from '@svc/anvil';
import { waitUntil } from '@svc/testkit';

export interface SubmittedJob {
  jobId: bigint;
  sessionId: bigint;
  replyKey: Uint8Array;
  messages: PromptMessage[];
}

export interface SignedSubmission extends SubmittedJob {
  readonly hash: string;
  /** The transaction with its sidecar, as sent to a node. */
  readonly networkForm: string;
  /** The signed transaction without its sidecar. */
  readonly rawTransaction: Uint8Array;
  readonly sidecar: BlobSidecar;
}

/** The signed transaction without the sidecar (the form whose hash is the transaction hash). */
function canonicalForm(networkForm: string): string {
  const tx = Transaction.from(networkForm);
  tx.blobs = null;
  return tx.serialized;
}

export type PromptBlob =
  | { kind: 'prompt'; model?: string; messages: PromptMessage[]; encryptTo?: Uint8Array }
  | { kind: 'raw'; blob: Uint8Array }
  | { kind: 'random' };

/**
 * Plays the service on chain: a funded owner that opens sessions naming a worker and submits jobs
 * with real encrypted prompt blobs.
 */
export class ServiceSide {
  readonly chain: ChainClient;
  readonly #owner: Wallet;
  readonly #deployment: Deployment;
  readonly #chainId: bigint;

  constructor(owner: Wallet, deployment: Deployment, chainId: bigint) {
    this.#owner = owner;
    this.#deployment = deployment;
    this.#chainId = chainId;
    this.chain = new ChainClient({
      provider: owner.provider!,
      jobRegistryAddress: deployment.jobRegistryAddress,
      workerRegistryAddress: deployment.workerRegistryAddress,
    });
  }

  get #registry() {
    return connectJobRegistry(this.#deployment.jobRegistryAddress, this.#owner);
  }

  async deposit(amount = parseEther('5')): Promise<void> {
    await (await this.#registry.deposit({ value: amount })).wait();
  }

  async openSession(worker: string, model: string): Promise<bigint> {
    const receipt = await (
      await this.#registry.openSession(this.#owner.address, modelIdOf(model), worker)
    ).wait();
    const log = receipt!.logs
      .map((entry) => this.#registry.interface.parseLog(entry))
      .find((parsed) => parsed?.name === 'SessionOpened');
    return log!.args.sessionId as bigint;
  }

  /** Waits until the worker claimed the session; returns its session public key. */
  async waitForClaim(sessionId: bigint, timeoutMs = 15_000): Promise<Uint8Array> {
    const session = await waitUntil(
      () => this.chain.getSession(sessionId),
      (current) => current.state === SessionState.Active,
      { what: `session ${sessionId} claimed`, timeoutMs, intervalMs: 50 },
    );
    return getBytes(session.publicKey);
  }

  async submitJob(sessionId: bigint, model: string, blob: PromptBlob): Promise<SubmittedJob> {
    const replyKey = generateReplyKey();
    let data: Uint8Array[] | number;
    let messages: PromptMessage[] = [];
    if (blob.kind === 'prompt') {
      messages = blob.messages;
      const publicKey = blob.encryptTo ?? getBytes((await this.chain.getSession(sessionId)).publicKey);
      const plaintext = encodePromptPlaintext({ model: blob.model ?? model, messages, replyKey });
      const wire = encryptPrompt(plaintext, publicKey, {
        chainId: this.#chainId,
        jobRegistry: this.#deployment.jobRegistryAddress,
        sessionId,
      });
      data = [encodeBlob(wire)];
    } else {
      data = blob.kind === 'raw' ? [blob.blob] : 1;
    }
    const fee = await this.chain.jobFee(modelIdOf(model));
    const registry = this.#registry;
    const request = await registry.submitJobFor.populateTransaction(
      this.#owner.address,
      sessionId,
      await registry.nextJobId(sessionId),
      fee,
      0,
      0,
    );
    const receipt = await (await sendWithBlobs(this.#owner, request, data)).wait();
    const log = receipt!.logs
      .map((entry) => registry.interface.parseLog(entry))
      .find((parsed) => parsed?.name === 'JobSubmitted');
    return { jobId: log!.args.jobId as bigint, sessionId, replyKey, messages };
  }

  /**
   * Signs, without sending, a `submitJobFor` blob transaction carrying a real encrypted prompt: what the
   * orchestrator hands a worker at broadcast. `nonce` makes a replacement of an earlier one; `payer` is a
   * wallet that authorized this side as its delegate (else this side pays for itself).
   */
  async signSubmission(
    sessionId: bigint,
    model: string,
    messages: PromptMessage[],
    options: { nonce?: number; jobId?: bigint; tip?: bigint; payer?: string } = {},
  ): Promise<SignedSubmission> {
    const replyKey = generateReplyKey();
    const publicKey = getBytes((await this.chain.getSession(sessionId)).publicKey);
    const plaintext = encodePromptPlaintext({ model, messages, replyKey });
    const wire = encryptPrompt(plaintext, publicKey, {
      chainId: this.#chainId,
      jobRegistry: this.#deployment.jobRegistryAddress,
      sessionId,
    });
    const sidecar = blobSidecarOf(wire);
    const registry = this.#registry;
    const jobId = options.jobId ?? (await registry.nextJobId(sessionId));
    const fee = await this.chain.jobFee(modelIdOf(model));
    const request = await registry.submitJobFor.populateTransaction(
      options.payer ?? this.#owner.address,
      sessionId,
      jobId,
      fee,
      0,
      0,
    );
    const provider = this.#owner.provider!;
    const nonce = options.nonce ?? (await provider.getTransactionCount(this.#owner.address, 'pending'));
    const tip = options.tip ?? 2_000_000_000n;
    const signed = await this.#owner.signTransaction({
      ...request,
      type: 3,
      chainId: this.#chainId,
      nonce,
      gasLimit: 600_000n,
      maxPriorityFeePerGas: tip,
      maxFeePerGas: 100_000_000_000n + tip,
      maxFeePerBlobGas: 10_000_000_000n,
      blobs: [{ data: sidecar.data, commitment: sidecar.commitment, proof: sidecar.proof }],
    });
    const parsed = Transaction.from(signed);
    return {
      jobId,
      sessionId,
      replyKey,
      messages,
      hash: parsed.hash!,
      networkForm: signed,
      rawTransaction: getBytes(canonicalForm(signed)),
      sidecar,
    };
  }

  /** Sends a signed submission (with its sidecar) to the node's pool. */
  async broadcast(submission: SignedSubmission): Promise<void> {
    await this.#owner.provider!.broadcastTransaction(submission.networkForm);
  }

  async closeSession(sessionId: bigint): Promise<void> {
    await (await this.#registry.closeSession(sessionId)).wait();
  }

  /** Waits until the job left `Submitted` (completed or failed). */
  waitForOutcome(jobId: bigint, timeoutMs = 20_000): Promise<Job> {
    return waitUntil(
      () => this.chain.getJob(jobId),
      (job) => job.state !== JobState.Submitted,
      { what: `job ${jobId} completed or failed`, timeoutMs, intervalMs: 50 },
    );
  }

  /** The answer hash a completed job's worker committed (from its `JobCompleted`), if any. */
  async committedHash(job: Job): Promise<string | undefined> {
    return (await this.chain.commitmentOf(job))?.responseHash;
  }
}
